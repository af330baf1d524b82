//! Embeddings get the chat links' retry and breaker, with an attempt record, and the traits a
//! user imports together name no method twice (issue 40's new-user list).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ripcord_core::testing::ScriptedModel;
// Every trait a user of the crates imports at once: a method call below that two of them
// named would not compile (E0034).
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, Context, Decorator, EmbeddingChain,
    EmbeddingModel, EmbeddingRequest, EmbeddingResponse, Error, ErrorKind, ModelId, Result,
    async_trait,
};
use ripcord_resilience::{BreakerPolicy, ChatModelExt, EmbeddingModelExt, RetryPolicy};

/// An embedding endpoint that fails its first `failures` calls with `kind`, then answers.
#[derive(Debug)]
struct Endpoint {
    id: ModelId,
    caps: Capabilities,
    failures: usize,
    kind: ErrorKind,
    calls: Arc<AtomicUsize>,
}

impl Endpoint {
    fn new(name: &str, failures: usize, kind: ErrorKind) -> Self {
        Endpoint {
            id: ModelId::new(name, "text-embedding-3-small"),
            caps: Capabilities::new(128_000, 4096),
            failures,
            kind,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }
}

#[async_trait]
impl EmbeddingModel for Endpoint {
    fn embedding_id(&self) -> &ModelId {
        &self.id
    }

    async fn embed(&self, req: &EmbeddingRequest, _ctx: &Context) -> Result<EmbeddingResponse> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n < self.failures {
            return Err(Error::new(self.kind, format!("failure {n}")));
        }
        Ok(EmbeddingResponse::new(
            vec![vec![0.5; 3]; req.inputs.len()],
            "text-embedding-3-small",
        ))
    }
}

/// The same endpoint is a chat model too, as OpenAI's and Gemini's adapters are.
#[async_trait]
impl ChatModel for Endpoint {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    async fn chat(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        Ok(ChatResponse::new("chat"))
    }

    async fn stream(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ripcord_core::ChatStream> {
        Err(Error::new(ErrorKind::ServerError, "no streams here"))
    }
}

/// A user's decorator, written with every trait above in scope.
#[derive(Debug)]
struct Tagged<M>(M);

#[async_trait]
impl<M: ChatModel> Decorator for Tagged<M> {
    type Inner = M;

    fn inner(&self) -> &M {
        &self.0
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let mut r = self.0.chat(req, ctx).await?;
        r.content.push_str(" (tagged)");
        Ok(r)
    }
}

fn request() -> EmbeddingRequest {
    EmbeddingRequest::new(vec!["hello".into(), "world".into()])
}

#[tokio::test(start_paused = true)]
async fn the_traits_a_user_imports_together_name_each_method_once() {
    let endpoint = Endpoint::new("both", 0, ErrorKind::ServerError);
    // `id` is the chat model's, `embedding_id` the embedding model's: no E0034.
    assert_eq!(endpoint.id().name.as_ref(), "both");
    assert_eq!(endpoint.embedding_id().name.as_ref(), "both");
    // A concrete decorator's `chat` and `id` are the ChatModel's (Decorator's are decorated_*).
    let tagged = Tagged(ScriptedModel::new("m").reply("hi"));
    assert_eq!(tagged.id().name.as_ref(), "m");
    let r = tagged
        .chat(&ChatRequest::user("x"), &Context::new())
        .await
        .unwrap();
    assert_eq!(r.text(), "hi (tagged)");
    // Both extension traits on a model that is both kinds.
    let chat = Endpoint::new("c", 0, ErrorKind::ServerError).with_retry(RetryPolicy::default());
    assert_eq!(chat.id().name.as_ref(), "c");
    let emb =
        Endpoint::new("e", 0, ErrorKind::ServerError).with_embedding_retry(RetryPolicy::default());
    assert_eq!(emb.embedding_id().name.as_ref(), "e");
}

#[tokio::test(start_paused = true)]
async fn retry_resends_a_failed_embedding_and_records_every_attempt() {
    let endpoint = Endpoint::new("openai", 2, ErrorKind::ServerError);
    let calls = Arc::clone(&endpoint.calls);
    let link = endpoint.with_embedding_retry(RetryPolicy::default());
    let resp = link.embed(&request(), &Context::new()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(resp.vectors.len(), 2);
    let kinds: Vec<_> = resp.attempts.iter().map(|a| a.error_kind).collect();
    assert_eq!(
        kinds,
        [
            Some(ErrorKind::ServerError),
            Some(ErrorKind::ServerError),
            None
        ]
    );
    assert!(resp.attempts.iter().all(|a| &*a.provider == "openai"));
}

#[tokio::test(start_paused = true)]
async fn retry_stops_at_max_attempts_and_the_error_carries_them() {
    let endpoint = Endpoint::new("openai", usize::MAX, ErrorKind::ServerError);
    let calls = Arc::clone(&endpoint.calls);
    let policy = RetryPolicy::builder().max_attempts(2).build().unwrap();
    let e = endpoint
        .with_embedding_retry(policy)
        .embed(&request(), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(e.kind(), ErrorKind::ServerError);
    assert_eq!(e.attempts().len(), 2);
    // A request the vendor refuses as malformed is not resent.
    let endpoint = Endpoint::new("openai", usize::MAX, ErrorKind::InvalidRequest);
    let calls = Arc::clone(&endpoint.calls);
    let e = endpoint
        .with_embedding_retry(RetryPolicy::default())
        .embed(&request(), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_refuses_embeddings_without_calling_the_vendor() {
    let endpoint = Endpoint::new("openai", usize::MAX, ErrorKind::ServerError);
    let calls = Arc::clone(&endpoint.calls);
    let policy = BreakerPolicy::builder()
        .consecutive_failures(2)
        .open_for(Duration::from_secs(30))
        .build()
        .unwrap();
    let link = endpoint.with_embedding_breaker(policy);
    for _ in 0..2 {
        let e = link.embed(&request(), &Context::new()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ServerError);
    }
    let e = link.embed(&request(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
    assert!(e.retry_after().is_some());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the open breaker called the vendor"
    );
    // After the open spell a probe goes through again.
    tokio::time::advance(Duration::from_secs(31)).await;
    let _ = link.embed(&request(), &Context::new()).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn the_embedding_chain_records_the_failed_link_and_the_serving_one() {
    let failing = Endpoint::new("us", usize::MAX, ErrorKind::ServerError);
    let serving = Endpoint::new("eu", 0, ErrorKind::ServerError);
    let chain = EmbeddingChain::builder()
        .link(failing)
        .link(serving.with_embedding_retry(RetryPolicy::default()))
        .build()
        .unwrap();
    let resp = chain.embed(&request(), &Context::new()).await.unwrap();
    assert_eq!(resp.served_by.as_deref(), Some("eu"));
    let record: Vec<_> = resp
        .attempts
        .iter()
        .map(|a| (a.provider.to_string(), a.error_kind))
        .collect();
    assert_eq!(
        record,
        [
            ("us".to_owned(), Some(ErrorKind::ServerError)),
            ("eu".to_owned(), None)
        ]
    );
}
