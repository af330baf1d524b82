//! CPU time, to attribute each row's cost per request to the process that spent it.
//!
//! This process: `getrusage(RUSAGE_SELF)` (user + system; Linux keeps the sum exact to the
//! nanosecond, whatever the tick). A child process (the upstream, the gateway): the sum of its
//! threads' on-CPU nanoseconds from `/proc/PID/task/*/schedstat`, falling back to the tick-based
//! `utime + stime` of `/proc/PID/stat` when schedstat is not available.

use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;

fn from_timeval(t: TimeVal) -> Duration {
    let secs = u64::try_from(t.tv_sec()).unwrap_or(0);
    let micros = u64::try_from(t.tv_usec()).unwrap_or(0);
    Duration::from_secs(secs) + Duration::from_micros(micros)
}

/// User plus system CPU time of this process so far.
pub(crate) fn self_cpu() -> Duration {
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => from_timeval(u.user_time()) + from_timeval(u.system_time()),
        Err(_) => Duration::ZERO,
    }
}

/// CPU time of process `pid` so far (all its live threads), or `None` when it cannot be read.
pub(crate) fn process_cpu(pid: u32) -> Option<Duration> {
    schedstat(pid).or_else(|| stat_ticks(pid))
}

fn schedstat(pid: u32) -> Option<Duration> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ns: u64 = 0;
    let mut any = false;
    for entry in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        if let Some(v) = text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        {
            ns = ns.saturating_add(v);
            any = true;
        }
    }
    any.then(|| Duration::from_nanos(ns))
}

fn stat_ticks(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after it are plain.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime field 14, stime field 15 (1-based).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on every Linux we run on.
    Some(Duration::from_millis((utime + stime) * 10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cpu_is_readable_both_ways_and_grows() {
        let a = self_cpu();
        let mut x: u64 = 1;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        assert!(x != 0);
        let b = self_cpu();
        assert!(b > a, "{a:?} -> {b:?}");
        let pid = std::process::id();
        assert!(process_cpu(pid).is_some_and(|d| d > Duration::ZERO));
        assert!(stat_ticks(pid).is_some());
        assert!(process_cpu(u32::MAX).is_none());
    }
}
