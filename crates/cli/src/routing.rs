//! The models between the gateway and the routes' chains: which route a call goes to, which
//! tenant (and sub-tenant) pays for it, and which key's limits it counts against.
//!
//! A tenant's budget and a key's limits are accounts that span every route, so they cannot be
//! decorators of one route's chain. Instead one [`RouteSwitch`] holds every route's chain and
//! picks one per call from the [`Route`] the call's [`Context`] carries (a typed extension, set
//! by the gateway's front door); a budget or a key limiter wraps the switch once and so sees the
//! calls of all routes. A call without one goes to the first route (the default).
//!
//! Sub-tenants: a key with `sub_tenants = true` lets its client name one of its own end users
//! ([`SubTenant`]). [`SubTenants`] then charges the call to a second budget account,
//! `tenant/sub`, inside the tenant's own: both levels pay, and either running out refuses the
//! call. Without a sub-tenant the call skips the inner budget.

use std::sync::Arc;

use async_trait::async_trait;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ModelId, Result,
};

/// The route of a call: its index in the config's routes, carried as a typed [`Context`]
/// extension (`ctx.with_extension(Route(i))`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route(pub usize);

impl Route {
    /// The route a call's context names, if any.
    pub fn of(ctx: &Context) -> Option<usize> {
        ctx.extension::<Route>().map(|r| r.0)
    }
}

/// The sub-tenant of a call (for keys with `sub_tenants = true`), carried as a typed
/// [`Context`] extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubTenant(pub Arc<str>);

/// Sends each call to the route its context names (the first route when it names none).
#[derive(Debug)]
pub struct RouteSwitch {
    id: ModelId,
    caps: Capabilities,
    routes: Vec<Arc<dyn ChatModel>>,
    bounded: bool,
}

impl RouteSwitch {
    /// A switch over `routes` (at least one).
    ///
    /// Its capabilities are those of the route with the largest output, so a budget or a limit
    /// that reserves "the largest answer" up front reserves enough for any route (and is
    /// settled with the real usage afterwards).
    ///
    /// # Errors
    ///
    /// `InvalidRequest` when `routes` is empty.
    pub fn new(routes: Vec<Arc<dyn ChatModel>>) -> Result<Self> {
        let caps = routes
            .iter()
            .map(|r| r.capabilities())
            .max_by_key(|c| c.max_output_tokens)
            .cloned()
            .ok_or_else(|| {
                Error::new(
                    ripcord_core::ErrorKind::InvalidRequest,
                    "a route switch needs at least one route",
                )
            })?;
        let bounded = routes.iter().all(|r| r.bounds_itself());
        Ok(RouteSwitch {
            id: ModelId::new("ripcord", "ripcord"),
            caps,
            routes,
            bounded,
        })
    }

    fn pick(&self, ctx: &Context) -> Result<&Arc<dyn ChatModel>> {
        let i = Route::of(ctx).unwrap_or(0);
        self.routes.get(i).ok_or_else(|| bad_route(i))
    }
}

fn bad_route(i: usize) -> Error {
    Error::new(
        ripcord_core::ErrorKind::InvalidRequest,
        format!("no route number {i} in this gateway"),
    )
}

#[async_trait]
impl ChatModel for RouteSwitch {
    fn id(&self) -> &ModelId {
        &self.id
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn bounds_itself(&self) -> bool {
        self.bounded
    }

    fn refusal(&self, ctx: &Context) -> Option<Error> {
        self.pick(ctx).ok().and_then(|m| m.refusal(ctx))
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        self.pick(ctx)?.chat(req, ctx).await
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        self.pick(ctx)?.stream(req, ctx).await
    }
}

/// Charges calls that name a sub-tenant to a second account (`tenant/sub`) as well.
#[derive(Debug)]
pub struct SubTenants {
    /// The switch inside the sub-tenant budget.
    budgeted: Arc<dyn ChatModel>,
    /// The switch itself.
    plain: Arc<dyn ChatModel>,
}

impl SubTenants {
    /// `budgeted` is `plain` inside the per-sub-tenant budget.
    pub fn new(budgeted: Arc<dyn ChatModel>, plain: Arc<dyn ChatModel>) -> Self {
        SubTenants { budgeted, plain }
    }

    /// The model to call, and the context to call it with.
    fn target(&self, ctx: &Context) -> (&Arc<dyn ChatModel>, Option<Context>) {
        match (ctx.tenant(), ctx.extension::<SubTenant>()) {
            (Some(tenant), Some(SubTenant(sub))) => (
                &self.budgeted,
                Some(ctx.clone().with_tenant(format!("{tenant}/{sub}"))),
            ),
            _ => (&self.plain, None),
        }
    }
}

#[async_trait]
impl ChatModel for SubTenants {
    fn id(&self) -> &ModelId {
        self.plain.id()
    }

    fn capabilities(&self) -> &Capabilities {
        self.plain.capabilities()
    }

    fn bounds_itself(&self) -> bool {
        self.plain.bounds_itself() && self.budgeted.bounds_itself()
    }

    fn refusal(&self, ctx: &Context) -> Option<Error> {
        let (m, sub) = self.target(ctx);
        m.refusal(sub.as_ref().unwrap_or(ctx))
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let (m, sub) = self.target(ctx);
        m.chat(req, sub.as_ref().unwrap_or(ctx)).await
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let (m, sub) = self.target(ctx);
        m.stream(req, sub.as_ref().unwrap_or(ctx)).await
    }
}

/// The gateway's model seen under a key's name, so the key's rate limiter has its own
/// identity: its refusals name the key (not a vendor), and in Redis mode its shared cells are
/// keyed by it.
#[derive(Debug)]
pub struct KeyScope {
    id: ModelId,
    inner: Arc<dyn ChatModel>,
}

impl KeyScope {
    /// The prefix of every key scope's link name.
    pub const PREFIX: &'static str = "gateway-key:";

    /// `inner` under the name `gateway-key:<label>`.
    pub fn new(label: &str, inner: Arc<dyn ChatModel>) -> Self {
        KeyScope {
            id: ModelId::new(format!("{}{label}", Self::PREFIX), "gateway"),
            inner,
        }
    }
}

/// Everything but the name forwards (calls return the inner model's own future).
impl ripcord_core::Decorator for KeyScope {
    type Inner = dyn ChatModel;

    fn inner(&self) -> &Self::Inner {
        &*self.inner
    }

    /// Deliberately not forwarded: the key's name, not the vendor's.
    fn decorated_id(&self) -> &ModelId {
        &self.id
    }
}

/// A model pinned to one route: every call carries that route in its context (for
/// `ripcord chat --route`).
#[derive(Debug)]
pub struct Pinned {
    route: usize,
    inner: Arc<dyn ChatModel>,
}

impl Pinned {
    /// `inner` (a model over a [`RouteSwitch`]) with every call sent to route number `index`.
    pub fn new(inner: Arc<dyn ChatModel>, index: usize) -> Self {
        Pinned {
            route: index,
            inner,
        }
    }

    fn ctx(&self, ctx: &Context) -> Context {
        ctx.clone().with_extension(Route(self.route))
    }
}

#[async_trait]
impl ripcord_core::Decorator for Pinned {
    type Inner = dyn ChatModel;

    fn inner(&self) -> &Self::Inner {
        &*self.inner
    }

    fn decorated_refusal(&self, ctx: &Context) -> Option<Error> {
        self.inner.refusal(&self.ctx(ctx))
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        self.inner.chat(req, &self.ctx(ctx)).await
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        self.inner.stream(req, &self.ctx(ctx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ripcord_core::testing::ScriptedModel;

    fn named(name: &str) -> Arc<dyn ChatModel> {
        Arc::new(ScriptedModel::new(name).reply(name))
    }

    /// A model whose hooks answer as told.
    #[derive(Debug)]
    struct Hooked {
        id: ModelId,
        caps: Capabilities,
        bounds: bool,
        refuses: bool,
    }

    #[async_trait]
    impl ChatModel for Hooked {
        fn id(&self) -> &ModelId {
            &self.id
        }
        fn capabilities(&self) -> &Capabilities {
            &self.caps
        }
        async fn chat(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
            Ok(ChatResponse::new("ok"))
        }
        fn bounds_itself(&self) -> bool {
            self.bounds
        }
        fn refusal(&self, ctx: &Context) -> Option<Error> {
            // Refuses only calls pinned to route 0, so `Pinned` must hand on its context.
            (self.refuses && Route::of(ctx) == Some(0))
                .then(|| Error::new(ripcord_core::ErrorKind::RateLimited, "inner refuses"))
        }
    }

    /// The gateway's wrappers forward the hooks (through `Decorator`'s defaults).
    #[test]
    fn the_key_scope_and_the_pin_forward_bounds_itself_and_refusal() {
        let ctx = Context::new().with_extension(Route(0));
        for (bounds, refuses) in [(false, false), (true, true), (true, false), (false, true)] {
            let inner = || -> Arc<dyn ChatModel> {
                Arc::new(Hooked {
                    id: ModelId::new("inner", "inner-1"),
                    caps: Capabilities::new(4096, 256),
                    bounds,
                    refuses,
                })
            };
            let scope = KeyScope::new("team-a", inner());
            assert_eq!(scope.bounds_itself(), bounds);
            assert_eq!(scope.refusal(&ctx).is_some(), refuses);
            assert_eq!(ChatModel::id(&scope).name.as_ref(), "gateway-key:team-a");
            let pinned = Pinned::new(inner(), 0);
            assert_eq!(pinned.bounds_itself(), bounds);
            assert_eq!(pinned.refusal(&Context::new()).is_some(), refuses);
            assert_eq!(ChatModel::id(&pinned).name.as_ref(), "inner");
        }
    }

    #[tokio::test]
    async fn the_switch_follows_the_context_and_defaults_to_the_first_route() {
        let s = RouteSwitch::new(vec![named("a"), named("b")]).unwrap();
        let req = ChatRequest::user("hi");
        assert_eq!(s.chat(&req, &Context::new()).await.unwrap().content, "a");
        let ctx = Context::new().with_extension(Route(1));
        assert_eq!(s.chat(&req, &ctx).await.unwrap().content, "b");
        let bad = Context::new().with_extension(Route(7));
        let e = s.chat(&req, &bad).await.unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::InvalidRequest);
        assert!(RouteSwitch::new(Vec::new()).is_err());
        let pinned = Pinned::new(Arc::new(s), 1);
        assert_eq!(
            pinned.chat(&req, &Context::new()).await.unwrap().content,
            "b"
        );
    }
}
