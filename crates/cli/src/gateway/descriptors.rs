//! File descriptors: the gateway's own limit, raised at start and planned for.
//!
//! Every client connection holds a descriptor, and so does every connection to a vendor, to
//! Redis, to an OTLP collector. The soft `RLIMIT_NOFILE` is commonly 1,024 while the hard one is
//! far higher; a gateway left at the soft limit runs out under an ordinary burst, and an
//! outbound connect that then fails with `EMFILE` is the gateway's failure, not the vendor's
//! (the providers classify it as a local refusal, see `ripcord_providers`). So `ripcord serve`
//! raises the soft limit to the hard one at start ([`raise_nofile_limit`]) and fits its
//! connection cap under what it got ([`super::ServeLimits::fitted_to_descriptors`]): it sheds
//! connections before the process runs out.

/// Descriptors kept for everything but client connections and their vendor connections: the
/// listeners, stdio, Redis, OTLP, the runtime's own, a few files.
pub(crate) const BASE_RESERVE: u64 = 64;

/// Raises the soft descriptor limit to the hard one; returns the soft limit now in force
/// (`None` where the platform has no such limit or it cannot be read).
#[cfg(unix)]
pub fn raise_nofile_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= hard {
        return Some(soft);
    }
    if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    // macOS refuses a soft limit above OPEN_MAX even when the hard one is unlimited.
    let capped = hard.min(10_240);
    if capped > soft && setrlimit(Resource::RLIMIT_NOFILE, capped, hard).is_ok() {
        return Some(capped);
    }
    Some(soft)
}

/// Raises the soft descriptor limit to the hard one (no such limit on this platform).
#[cfg(not(unix))]
pub fn raise_nofile_limit() -> Option<u64> {
    None
}

/// True when an I/O error says this process (or the system) is out of file descriptors.
pub(crate) fn is_exhausted(e: &std::io::Error) -> bool {
    // EMFILE and ENFILE: the same numbers on Linux, the BSDs and macOS; WSAEMFILE on Windows.
    #[cfg(unix)]
    const CODES: &[i32] = &[24, 23];
    #[cfg(windows)]
    const CODES: &[i32] = &[10024];
    #[cfg(not(any(unix, windows)))]
    const CODES: &[i32] = &[];
    e.raw_os_error().is_some_and(|c| CODES.contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emfile_is_exhaustion_and_a_refusal_is_not() {
        #[cfg(unix)]
        assert!(is_exhausted(&std::io::Error::from_raw_os_error(24)));
        assert!(!is_exhausted(&std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused
        )));
    }

    #[cfg(unix)]
    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        use nix::sys::resource::{Resource, getrlimit};
        let got = raise_nofile_limit().unwrap();
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(got, soft);
        assert!(soft == hard || soft == hard.min(10_240));
    }
}
