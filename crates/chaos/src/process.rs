//! Stopping the helper processes tests start beside the fakes (an OTLP receiver, a Redis or
//! Postgres server): one way, so each stops and is reaped alike; and reading where a
//! `ripcord serve` child listens.

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

/// Reads `ripcord serve`'s stderr until it announces where it listens (`ripcord: serving on
/// http://127.0.0.1:PORT (…)`) and returns that URL with the lines it printed before it (its
/// warnings). The rest of the stream is left to the caller, who must keep draining it so the
/// server never blocks on a full pipe.
///
/// # Errors
///
/// When stderr ends or cannot be read first (the server exited before listening): a message
/// with the lines it printed, one per line.
pub fn serving_url(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
) -> Result<(String, Vec<String>), String> {
    let mut before = Vec::new();
    for line in lines {
        let line = line.map_err(|e| format!("reading ripcord serve's stderr: {e}"))?;
        if let Some(rest) = line.strip_prefix("ripcord: serving on ") {
            let url = rest.split_whitespace().next().unwrap_or_default();
            return Ok((url.to_owned(), before));
        }
        before.push(line);
    }
    Err(format!(
        "ripcord serve exited before listening:\n{}",
        before.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_line_gives_the_url_and_what_came_before() {
        let out = [
            "warning: a",
            "ripcord: serving on http://127.0.0.1:9 (2 links)",
            "x",
        ];
        let mut lines = out.iter().map(|l| Ok((*l).to_owned()));
        let (url, before) = serving_url(&mut lines).unwrap();
        assert_eq!(
            (url.as_str(), before),
            ("http://127.0.0.1:9", vec!["warning: a".to_owned()])
        );
        assert_eq!(
            lines.next().unwrap().unwrap(),
            "x",
            "the rest is left unread"
        );

        let err = serving_url(&mut ["boom"].iter().map(|l| Ok((*l).to_owned()))).unwrap_err();
        assert_eq!(err, "ripcord serve exited before listening:\nboom");
    }
}
