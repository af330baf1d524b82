//! A fallback chain for embeddings — across endpoints of the *same* model only.
//!
//! Vectors from different models live in different spaces: falling back from one embedding
//! model to another would silently corrupt every similarity search that mixes them. So an
//! [`EmbeddingChain`] refuses, at build time, links that serve different models; it only moves
//! between endpoints (regions, accounts, self-hosted replicas) of one model.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::chain::DEFAULT_DEADLINE;
use crate::context::Context;
use crate::error::{Disposition, Error, ErrorKind, Result};
use crate::model::{EmbeddingModel, EmbeddingRequest, EmbeddingResponse, ModelId};
use crate::response::Attempt;

/// Why an embedding chain could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmbeddingBuildError {
    /// No link.
    NoLinks,
    /// A link serves a different model than the first link.
    MixedModels {
        /// The first link's model.
        expected: String,
        /// The offending link.
        link: String,
        /// Its model.
        found: String,
    },
}

impl std::fmt::Display for EmbeddingBuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmbeddingBuildError::NoLinks => {
                f.write_str("an embedding chain needs at least one link")
            }
            EmbeddingBuildError::MixedModels {
                expected,
                link,
                found,
            } => write!(
                f,
                "embedding link {link:?} serves model {found:?}, but the chain serves {expected:?}; \
                 vectors of different models are not comparable"
            ),
        }
    }
}

impl std::error::Error for EmbeddingBuildError {}

/// Fallback across endpoints serving one embedding model.
///
/// # Examples
///
/// ```
/// # use async_trait::async_trait;
/// # use ripcord_core::*;
/// # #[derive(Debug)] struct E(ModelId);
/// # #[async_trait] impl EmbeddingModel for E {
/// #   fn embedding_id(&self) -> &ModelId { &self.0 }
/// #   async fn embed(&self, r: &EmbeddingRequest, _: &Context) -> Result<EmbeddingResponse> {
/// #     Ok(EmbeddingResponse::new(vec![vec![0.0; 3]; r.inputs.len()], "m")) } }
/// let mixed = EmbeddingChain::builder()
///     .link(E(ModelId::new("us", "text-embedding-3-small")))
///     .link(E(ModelId::new("eu", "text-embedding-3-large")))
///     .build();
/// assert!(mixed.is_err());
/// ```
#[derive(Debug, Clone)]
pub struct EmbeddingChain {
    id: ModelId,
    links: Arc<[Arc<dyn EmbeddingModel>]>,
    deadline: Duration,
}

/// Builds an [`EmbeddingChain`].
#[derive(Debug, Default)]
pub struct EmbeddingChainBuilder {
    links: Vec<Arc<dyn EmbeddingModel>>,
    deadline: Option<Duration>,
}

impl EmbeddingChainBuilder {
    /// Appends a link.
    pub fn link(mut self, model: impl EmbeddingModel + 'static) -> Self {
        self.links.push(Arc::new(model));
        self
    }

    /// Appends a shared link.
    pub fn link_arc(mut self, model: Arc<dyn EmbeddingModel>) -> Self {
        self.links.push(model);
        self
    }

    crate::setters! {
        /// The end-to-end deadline (default [`DEFAULT_DEADLINE`]).
        deadline(d: Duration) => deadline = Some(d);
    }

    /// Validates and builds.
    ///
    /// # Errors
    ///
    /// No links, or links serving different models.
    pub fn build(self) -> std::result::Result<EmbeddingChain, EmbeddingBuildError> {
        let first = self.links.first().ok_or(EmbeddingBuildError::NoLinks)?;
        let model = first.embedding_id().model.clone();
        for l in &self.links[1..] {
            if l.embedding_id().model != model {
                return Err(EmbeddingBuildError::MixedModels {
                    expected: model.to_string(),
                    link: l.embedding_id().name.to_string(),
                    found: l.embedding_id().model.to_string(),
                });
            }
        }
        Ok(EmbeddingChain {
            id: ModelId::new("embedding-chain", model),
            links: self.links.into(),
            deadline: self.deadline.unwrap_or(DEFAULT_DEADLINE),
        })
    }
}

impl EmbeddingChain {
    /// A builder.
    pub fn builder() -> EmbeddingChainBuilder {
        EmbeddingChainBuilder::default()
    }
}

#[async_trait]
impl EmbeddingModel for EmbeddingChain {
    fn embedding_id(&self) -> &ModelId {
        &self.id
    }

    /// Only when every endpoint does: any of them may be the one that serves.
    fn accepts_tokens(&self) -> bool {
        self.links.iter().all(|l| l.accepts_tokens())
    }

    async fn embed(&self, req: &EmbeddingRequest, ctx: &Context) -> Result<EmbeddingResponse> {
        let ctx = ctx.clone().with_deadline(Instant::now() + self.deadline);
        let mut errors = Vec::new();
        let mut attempts = Vec::new();
        for link in self.links.iter() {
            if let Err(e) = ctx.check() {
                if e.kind() == ErrorKind::Cancelled {
                    return Err(e);
                }
                errors.push(e);
                break;
            }
            let started = Instant::now();
            match ctx.run(link.embed(req, &ctx)).await {
                Ok(mut resp) => {
                    let id = link.embedding_id();
                    resp.served_by = Some(id.name.clone());
                    if resp.attempts.is_empty() {
                        resp.attempts.push(Attempt::success(
                            id.name.clone(),
                            id.model.clone(),
                            started.elapsed(),
                        ));
                    }
                    attempts.append(&mut resp.attempts);
                    resp.attempts = attempts;
                    return Ok(resp);
                }
                Err(e) => {
                    let id = link.embedding_id();
                    let e = if e.provider().is_none() {
                        e.with_provider(id.name.clone(), id.model.clone())
                    } else {
                        e
                    };
                    let own = if e.attempts().is_empty() {
                        vec![Attempt::failure(
                            id.name.clone(),
                            id.model.clone(),
                            &e,
                            started.elapsed(),
                        )]
                    } else {
                        e.attempts().to_vec()
                    };
                    attempts.extend(own.iter().cloned());
                    let e = e.with_attempts(own);
                    if e.disposition() == Disposition::FailFast {
                        return Err(e);
                    }
                    errors.push(e);
                }
            }
        }
        Err(Error::exhausted(errors))
    }
}
