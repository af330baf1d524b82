//! A retry budget: retries may add at most a fraction of the calls made, over a sliding window.
//!
//! A count alone ("3 attempts") multiplies load by three exactly when a vendor is struggling;
//! a budget caps the extra load a link's retries add across all callers (tower and Finagle use
//! the same idea). Every logical call deposits one call; every retry withdraws one. A retry is
//! allowed while `retries < min_retries + ratio · calls` over the window, so a quiet link still
//! gets its `min_retries`.

use std::sync::Mutex;
use std::time::Duration;

use crate::clock::SharedClock;
use crate::window::Window;

const CALLS: usize = 0;
const RETRIES: usize = 1;

/// Settings of a retry budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBudget {
    /// Retries allowed per call made (default 0.2: retries add at most 20 % load).
    pub ratio: f64,
    /// Retries always allowed per window, whatever the traffic (default 10).
    pub min_retries: u32,
    /// The window (default 10 s).
    pub window: Duration,
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget {
            ratio: 0.2,
            min_retries: 10,
            window: Duration::from_secs(10),
        }
    }
}

/// The live state of a budget for one link.
#[derive(Debug)]
pub(crate) struct BudgetState {
    settings: RetryBudget,
    clock: SharedClock,
    window: Mutex<Window>,
}

impl BudgetState {
    pub(crate) fn new(settings: RetryBudget, clock: SharedClock) -> Self {
        let window = Window::new(clock.now(), settings.window, 10);
        BudgetState {
            settings,
            clock,
            window: Mutex::new(window),
        }
    }

    /// Records one logical call.
    pub(crate) fn deposit(&self) {
        let now = self.clock.now();
        if let Ok(mut w) = self.window.lock() {
            w.add(now, CALLS, 1);
        }
    }

    /// Takes one retry from the budget; false when it is spent.
    pub(crate) fn withdraw(&self) -> bool {
        let now = self.clock.now();
        let Ok(mut w) = self.window.lock() else {
            return true;
        };
        let calls = w.sum(now, CALLS) as f64;
        let retries = w.sum(now, RETRIES) as f64;
        let allowed = f64::from(self.settings.min_retries) + self.settings.ratio * calls;
        if retries < allowed {
            w.add(now, RETRIES, 1);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::default_clock;

    #[tokio::test(start_paused = true)]
    async fn budget_caps_retries_and_refills_over_the_window() {
        let b = BudgetState::new(
            RetryBudget {
                ratio: 0.5,
                min_retries: 1,
                window: Duration::from_secs(10),
            },
            default_clock(),
        );
        for _ in 0..4 {
            b.deposit();
        }
        // 1 + 0.5 * 4 = 3 retries.
        assert!(b.withdraw() && b.withdraw() && b.withdraw());
        assert!(!b.withdraw());
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(b.withdraw());
        assert!(!b.withdraw());
    }
}
