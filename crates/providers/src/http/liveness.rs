//! A vendor's cheap liveness check: `GET` its model list.
//!
//! Listing models spends no tokens and touches no account limit that a chat call needs, which
//! is what an open breaker's background probe wants ([`ripcord_core::ChatModel::liveness`]).
//! The answer is judged by its status only: a success means the vendor is answering; any other
//! status is classified by the vendor's own error mapping, as a chat call's would be.

use std::fmt;

use ::http::header::HeaderMap;
use ripcord_core::async_trait;
use ripcord_core::{Context, Error, Liveness, Result};

use super::{Target, Transport};

/// How a vendor's failed answer becomes an error.
pub(crate) type Classify = Box<dyn Fn(u16, &HeaderMap, &[u8]) -> Error + Send + Sync>;

/// `GET <target>` through a provider's transport (its key, headers and time limits).
pub(crate) struct ListModels {
    transport: Transport,
    target: Target,
    classify: Classify,
}

impl ListModels {
    pub(crate) fn new(transport: Transport, target: Target, classify: Classify) -> Self {
        ListModels {
            transport,
            target,
            classify,
        }
    }
}

impl fmt::Debug for ListModels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListModels")
            .field("url", &self.target.as_str())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Liveness for ListModels {
    async fn check(&self, ctx: &Context) -> Result<()> {
        let result = self
            .transport
            .check(ctx, &self.target, |s, h, b| (self.classify)(s, h, b))
            .await;
        result.map_err(|e| self.transport.auth.scrub(e))
    }
}
