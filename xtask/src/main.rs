//! Project tasks: `cargo xtask <task>`.
fn main() {}
