//! A gateway whose config can be replaced while it serves (`SIGHUP`, `POST /admin/reload`).
//!
//! The listeners serve a thin router that hands each request to the *current* gateway router,
//! taken under a read lock that is held only long enough to clone it (an `Arc` inside). A
//! reload builds the whole new gateway first — config read and validated in full, links
//! rebuilt with every unchanged provider's link kept ([`crate::build::rebuild`]), a new
//! [`GatewayState`] — and only then swaps it in: a request already inside the old router
//! finishes there (streams included, with the links it started on), the next one meets the new
//! config. A config that does not load or build is refused with the same message `check-config`
//! gives, and the old one keeps serving.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::response::Response;

use super::GatewayState;

/// What rebuilds the gateway: the new state, or why the config was refused.
pub type Rebuild = Arc<dyn Fn() -> Result<(GatewayState, String), String> + Send + Sync>;

/// The current gateway and admin routers, and how to rebuild them.
pub struct Live {
    routers: RwLock<(Router, Router)>,
    rebuild: Rebuild,
    /// One reload at a time.
    reloading: Mutex<()>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").finish_non_exhaustive()
    }
}

impl Live {
    /// A live gateway serving `state`, rebuilt by `rebuild` on every reload.
    pub fn new(state: GatewayState, rebuild: Rebuild) -> Arc<Self> {
        Arc::new_cyclic(|me: &std::sync::Weak<Live>| {
            let state = Arc::new(state.with_live(me.clone()));
            Live {
                routers: RwLock::new(routers(state)),
                rebuild,
                reloading: Mutex::new(()),
            }
        })
    }

    /// Rebuilds from the config and swaps the new gateway in; what changed, or why the
    /// config was refused (the old one then keeps serving).
    ///
    /// # Errors
    ///
    /// The config error (file, line, key) or the build error.
    pub fn reload(self: &Arc<Self>) -> Result<String, String> {
        let _one = self
            .reloading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (state, summary) = (self.rebuild)()?;
        let state = Arc::new(state.with_live(Arc::downgrade(self)));
        let next = routers(state);
        *self.routers.write().unwrap_or_else(PoisonError::into_inner) = next;
        tracing::warn!(summary = %summary, "config reloaded");
        Ok(summary)
    }

    fn current(&self, admin: bool) -> Router {
        let r = self.routers.read().unwrap_or_else(PoisonError::into_inner);
        if admin { r.1.clone() } else { r.0.clone() }
    }
}

fn routers(state: Arc<GatewayState>) -> (Router, Router) {
    (
        super::router(Arc::clone(&state)),
        super::admin_router(state),
    )
}

async fn dispatch(router: Router, req: Request) -> Response {
    let mut router = router;
    // The router is always ready and never fails (its error type is `Infallible`).
    if let Err(never) =
        std::future::poll_fn(|cx| tower_service::Service::<Request>::poll_ready(&mut router, cx))
            .await
    {
        match never {}
    }
    match tower_service::Service::call(&mut router, req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

/// The router the gateway's listener serves: every request goes to the current gateway.
pub fn live_router(live: Arc<Live>) -> Router {
    Router::new()
        .fallback(|State(live): State<Arc<Live>>, req: Request| async move {
            dispatch(live.current(false), req).await
        })
        .with_state(live)
}

/// The router of `[server.admin] listen`: every request goes to the current admin endpoints.
pub fn live_admin_router(live: Arc<Live>) -> Router {
    Router::new()
        .fallback(|State(live): State<Arc<Live>>, req: Request| async move {
            dispatch(live.current(true), req).await
        })
        .with_state(live)
}
