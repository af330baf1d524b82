//! The process's signals and its listener: reload on `SIGHUP`, stop on `SIGTERM` or Ctrl-C.

use std::sync::Arc;

use ripcord_cli::gateway;

/// Reloads the config on every `SIGHUP`; a refused config is reported and the running one
/// keeps serving.
pub(crate) async fn reload_on_hangup(live: Arc<gateway::live::Live>) -> std::io::Result<()> {
    #[cfg(unix)]
    if let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        while hup.recv().await.is_some() {
            let l = Arc::clone(&live);
            match tokio::task::spawn_blocking(move || l.reload()).await {
                Ok(Ok(summary)) => eprintln!("ripcord: reloaded ({summary})"),
                Ok(Err(why)) => {
                    eprintln!("ripcord: reload refused, the running config keeps serving: {why}");
                }
                Err(e) => eprintln!("ripcord: reload failed: {e}"),
            }
        }
    }
    #[cfg(not(unix))]
    let _ = live;
    std::future::pending().await
}

/// Binds the gateway's listener with `backlog` (what `TcpListener::bind` does, with the
/// backlog configurable: std's is 128 on Linux).
pub(crate) fn bind_listener(
    addr: std::net::SocketAddr,
    backlog: u32,
) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

pub(crate) async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
