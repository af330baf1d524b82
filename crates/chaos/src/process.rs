//! Stopping the helper processes tests start beside the fakes (an OTLP receiver, a Redis or
//! Postgres server): one way, so each stops and is reaped alike.

use std::process::Child;

/// Kills `child` if it is still running and reaps it; `name` names it in the errors. Takes the
/// child out of `slot`, so a second call (an explicit stop, then a drop) does nothing. A failed
/// kill still reaps the process before its error is returned.
///
/// # Errors
///
/// A message naming `name` when its state cannot be read, it cannot be killed, or it cannot be
/// reaped.
pub fn stop_child(slot: &mut Option<Child>, name: &str) -> Result<(), String> {
    let Some(mut child) = slot.take() else {
        return Ok(());
    };
    let stopped = if child
        .try_wait()
        .map_err(|e| format!("{name}: {e}"))?
        .is_none()
    {
        child
            .kill()
            .map_err(|e| format!("could not stop {name}: {e}"))
    } else {
        Ok(())
    };
    let reaped = child
        .wait()
        .map(|_| ())
        .map_err(|e| format!("could not reap {name}: {e}"));
    stopped.and(reaped)
}
