//! ripcord-telemetry: see the workspace README; this crate is filled by its own issue.
