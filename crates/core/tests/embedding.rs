//! The embedding chain falls back only across endpoints of the same model.

use async_trait::async_trait;
use ripcord_core::{
    Context, EmbeddingChain, EmbeddingModel, EmbeddingRequest, EmbeddingResponse, Error, ErrorKind,
    ModelId, Result,
};

#[derive(Debug)]
struct Endpoint {
    id: ModelId,
    fail: Option<ErrorKind>,
}

#[async_trait]
impl EmbeddingModel for Endpoint {
    fn embedding_id(&self) -> &ModelId {
        &self.id
    }
    async fn embed(&self, req: &EmbeddingRequest, _: &Context) -> Result<EmbeddingResponse> {
        match self.fail {
            Some(k) => Err(Error::new(k, "down")),
            None => Ok(EmbeddingResponse::new(
                vec![vec![1.0, 0.0]; req.inputs.len()],
                self.id.model.to_string(),
            )),
        }
    }
}

fn ep(name: &str, model: &str, fail: Option<ErrorKind>) -> Endpoint {
    Endpoint {
        id: ModelId::new(name, model),
        fail,
    }
}

/// "us" fails with `kind`, then "eu" answers; one model.
#[allow(clippy::unwrap_used)] // a test helper fails the test by panicking
fn us_failing_then_eu(kind: ErrorKind) -> EmbeddingChain {
    EmbeddingChain::builder()
        .link(ep("us", "m", Some(kind)))
        .link(ep("eu", "m", None))
        .build()
        .unwrap()
}

#[test]
fn different_models_cannot_share_a_chain() {
    let e = EmbeddingChain::builder()
        .link(ep("us", "text-embedding-3-small", None))
        .link(ep("eu", "text-embedding-3-large", None))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("not comparable"), "{e}");
    assert!(EmbeddingChain::builder().build().is_err());
}

#[tokio::test]
async fn falls_back_across_endpoints_of_one_model() {
    let chain = us_failing_then_eu(ErrorKind::Overloaded);
    let r = chain
        .embed(
            &EmbeddingRequest::new(vec!["a".into(), "b".into()]),
            &Context::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.vectors.len(), 2);
    assert_eq!(r.served_by.as_deref(), Some("eu"));
}

#[tokio::test]
async fn invalid_requests_fail_fast() {
    let chain = us_failing_then_eu(ErrorKind::InvalidRequest);
    let e = chain
        .embed(&EmbeddingRequest::new(vec!["a".into()]), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
}
