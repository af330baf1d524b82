//! [`Decorator`]: the one way a model that wraps another model forwards what it does not change.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::capabilities::Capabilities;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::model::{ChatModel, Liveness, ModelId};
use crate::request::ChatRequest;
use crate::response::ChatResponse;
use crate::stream::ChatStream;

/// The boxed future `async_trait` methods return.
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A `chat`/`stream`-shaped method as `async_trait` expands it (the lifetimes and bounds of
/// its boxed future), with `$body` returning that boxed future: the forwarding methods below
/// hand the inner model's own future on instead of boxing it again.
macro_rules! boxed_call {
    ($(#[$attr:meta])* fn $name:ident(&$this:ident, $req:ident, $ctx:ident) -> $out:ty { $body:expr }) => {
        $(#[$attr])*
        fn $name<'a, 'b, 'c, 'async_trait>(
            &'a $this,
            $req: &'b ChatRequest,
            $ctx: &'c Context,
        ) -> BoxFuture<'async_trait, Result<$out>>
        where
            'a: 'async_trait,
            'b: 'async_trait,
            'c: 'async_trait,
            Self: 'async_trait,
        {
            $body
        }
    };
}

/// A model that wraps one inner model: every [`ChatModel`] method has a default here that
/// forwards to [`Decorator::inner`], so a decorator writes only what it changes, and a hook
/// added to `ChatModel` later reaches every decorator through one new default below instead of
/// an edit in each of them.
///
/// Every `Decorator` is a [`ChatModel`] (a blanket impl calls the methods here). The forwarding
/// defaults of `chat` and `stream` return the inner model's own boxed future, so a decorator
/// that does not override them costs no second box per call; an `async fn` override under
/// `#[async_trait]` costs the one box any `ChatModel` method costs.
///
/// Its methods are `decorated_*`, never a [`ChatModel`] method's name, so both traits can be
/// imported together and `retry.chat(…)` on a concrete decorator names one method (the
/// `ChatModel`'s, which the blanket impl routes here).
///
/// Overriding an `async fn` needs `#[async_trait]` on the `impl` block, as for `ChatModel`:
/// without it the compiler reports a lifetime mismatch against the trait's boxed future.
///
/// # Deliberate exceptions
///
/// A decorator overrides a hook (instead of forwarding it) where forwarding would be wrong:
///
/// - [`ChatModel::refusal`]: the breaker answers for its own state only; health forwards and
///   books the refusal as a failure; the cache answers `None` (a hit can serve a request the
///   inner model would refuse, and `refusal` does not see the request); retry answers `None`
///   (a later attempt may succeed where this one would be refused); the hedge answers `None`
///   (the hedge model may serve while the primary refuses).
///   The rate limit answers `None` too: its wait could outlast an inner breaker's open
///   spell, so the call's outcome could differ.
/// - [`ChatModel::bounds_itself`]: retry answers `true` (it races every wait and attempt
///   against the context itself); the hedge answers for both of its models.
/// - [`ChatModel::id`]: the gateway's per-key scope names the key, not the vendor.
///
/// `Arc<M>` is a model by a written-out impl (not a `Decorator`: see there); `Box<M>` is a
/// `Decorator`.
///
/// Routers that choose among several models per call (the chain, the gateway's route switch)
/// are no decorators: they implement [`ChatModel`] themselves.
///
/// # Examples
///
/// ```
/// use ripcord_core::{ChatModel, ChatRequest, ChatResponse, Context, Decorator, Result, async_trait};
///
/// #[derive(Debug)]
/// struct Shouting<M>(M);
///
/// #[async_trait]
/// impl<M: ChatModel> Decorator for Shouting<M> {
///     type Inner = M;
///     fn inner(&self) -> &M {
///         &self.0
///     }
///     async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
///         let mut r = self.0.chat(req, ctx).await?;
///         r.content = r.content.to_uppercase();
///         Ok(r)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use ripcord_core::testing::ScriptedModel;
/// let m = Shouting(ScriptedModel::new("m").reply("hi"));
/// // `id`, `capabilities`, `stream`, `bounds_itself` and `refusal` come from the inner model.
/// assert_eq!(m.id().name.as_ref(), "m");
/// let r = m.chat(&ChatRequest::user("x"), &Context::new()).await.unwrap();
/// assert_eq!(r.text(), "HI");
/// # }
/// ```
#[async_trait]
pub trait Decorator: Send + Sync + fmt::Debug {
    /// The wrapped model.
    type Inner: ChatModel + ?Sized;

    /// The wrapped model, which every method not overridden forwards to.
    fn inner(&self) -> &Self::Inner;

    /// As [`ChatModel::id`]; forwards by default.
    fn decorated_id(&self) -> &ModelId {
        ChatModel::id(self.inner())
    }

    /// As [`ChatModel::capabilities`]; forwards by default.
    fn decorated_capabilities(&self) -> &Capabilities {
        ChatModel::capabilities(self.inner())
    }

    boxed_call!(
        /// As [`ChatModel::chat`]; forwards by default (the inner model's own future, unboxed
        /// again).
        fn decorated_chat(&self, req, ctx) -> ChatResponse {
            ChatModel::chat(self.inner(), req, ctx)
        }
    );

    boxed_call!(
        /// As [`ChatModel::stream`]; forwards by default (the inner model's own future, unboxed
        /// again).
        fn decorated_stream(&self, req, ctx) -> ChatStream {
            ChatModel::stream(self.inner(), req, ctx)
        }
    );

    /// As [`ChatModel::bounds_itself`]; forwards by default. Correct for a decorator whose
    /// every added wait is itself bounded by the context (or that adds none).
    fn decorated_bounds_itself(&self) -> bool {
        ChatModel::bounds_itself(self.inner())
    }

    /// As [`ChatModel::refusal`]; forwards by default. Correct for a decorator that could not
    /// turn the inner model's refusal into another outcome and books nothing per call; see
    /// the exceptions above.
    fn decorated_refusal(&self, ctx: &Context) -> Option<Error> {
        ChatModel::refusal(self.inner(), ctx)
    }

    /// As [`ChatModel::liveness`]; forwards by default (the check goes to the vendor itself,
    /// past every policy: it spends no tokens and no caller's limits).
    fn decorated_liveness(&self) -> Option<Arc<dyn Liveness>> {
        ChatModel::liveness(self.inner())
    }
}

impl<D: Decorator> ChatModel for D {
    fn id(&self) -> &ModelId {
        Decorator::decorated_id(self)
    }
    fn capabilities(&self) -> &Capabilities {
        Decorator::decorated_capabilities(self)
    }
    boxed_call!(fn chat(&self, req, ctx) -> ChatResponse {
        Decorator::decorated_chat(self, req, ctx)
    });
    boxed_call!(fn stream(&self, req, ctx) -> ChatStream {
        Decorator::decorated_stream(self, req, ctx)
    });
    fn bounds_itself(&self) -> bool {
        Decorator::decorated_bounds_itself(self)
    }
    fn refusal(&self, ctx: &Context) -> Option<Error> {
        Decorator::decorated_refusal(self, ctx)
    }
    fn liveness(&self) -> Option<Arc<dyn Liveness>> {
        Decorator::decorated_liveness(self)
    }
}

/// A shared model is the model: everything forwards, and `chat`/`stream` return the inner
/// model's own boxed future.
///
/// Written out instead of being a [`Decorator`]: decorators hold their inner model as an
/// `Arc<dyn ChatModel>`, and inside an `impl Decorator` block `self.inner.chat(..)` on an `Arc`
/// that were a `Decorator` too would name two methods. The table test in
/// `crates/resilience/tests/forwarding.rs` holds this impl to the same hooks.
impl<M: ChatModel + ?Sized> ChatModel for Arc<M> {
    fn id(&self) -> &ModelId {
        (**self).id()
    }
    fn capabilities(&self) -> &Capabilities {
        (**self).capabilities()
    }
    boxed_call!(fn chat(&self, req, ctx) -> ChatResponse {
        (**self).chat(req, ctx)
    });
    boxed_call!(fn stream(&self, req, ctx) -> ChatStream {
        (**self).stream(req, ctx)
    });
    fn bounds_itself(&self) -> bool {
        (**self).bounds_itself()
    }
    fn refusal(&self, ctx: &Context) -> Option<Error> {
        (**self).refusal(ctx)
    }
    fn liveness(&self) -> Option<Arc<dyn Liveness>> {
        (**self).liveness()
    }
}

/// An owned boxed model is the model: everything forwards.
impl<M: ChatModel + ?Sized> Decorator for Box<M> {
    type Inner = M;
    fn inner(&self) -> &M {
        self
    }
}
