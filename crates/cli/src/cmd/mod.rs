//! The binary's commands and process plumbing that `main.rs` dispatches to.

pub(crate) mod ledger;
pub(crate) mod signals;
pub(crate) mod spend;
