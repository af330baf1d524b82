//! UTC calendar arithmetic without a date crate: the day ↔ (year, month, day) conversions of
//! the proleptic Gregorian calendar (Howard Hinnant's `civil_from_days` / `days_from_civil`),
//! and a wall-clock instant broken into its UTC fields.
//!
//! Used for monthly budget periods, the status page's and fake vendors' timestamps.
//!
//! ```
//! use ripcord_core::calendar::{Utc, civil_from_days, days_from_civil};
//! use std::time::{Duration, UNIX_EPOCH};
//!
//! assert_eq!(civil_from_days(0), (1970, 1, 1));
//! assert_eq!(days_from_civil(2024, 3, 1), 19_783);
//! let t = Utc::of(UNIX_EPOCH + Duration::from_secs(1_767_323_045));
//! assert_eq!(t.to_string(), "2026-01-02T03:04:05Z");
//! ```

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 to (year, month 1–12, day 1–31).
pub const fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // The day is 1–31 and the month 1–12 by construction: the casts cannot truncate.
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

/// The day (counted from 1970-01-01) of `year`-`month`-`day`; the inverse of
/// [`civil_from_days`]. `month` is 1–12.
pub const fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A wall-clock instant broken into its UTC fields, to the second. Its `Display` is RFC 3339
/// (`2026-01-02T03:04:05Z`); instants before 1970 show as the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utc {
    /// The year.
    pub year: i64,
    /// The month, 1–12.
    pub month: u32,
    /// The day of the month, 1–31.
    pub day: u32,
    /// The hour, 0–23.
    pub hour: u64,
    /// The minute, 0–59.
    pub minute: u64,
    /// The second, 0–59.
    pub second: u64,
}

impl Utc {
    /// `t`'s UTC fields.
    pub fn of(t: SystemTime) -> Self {
        let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let (year, month, day) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(i64::MAX));
        let rem = secs % 86_400;
        Utc {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
        }
    }

    /// `2026-01-02 03:04:05` (a space, no zone letter) — for text read by people.
    pub fn spaced(&self) -> String {
        let mut s = String::with_capacity(19);
        // Writing to a String cannot fail.
        let _ = self.write(&mut s, ' ', "");
        s
    }

    fn write(&self, f: &mut impl fmt::Write, sep: char, zone: &str) -> fmt::Result {
        let Utc {
            year,
            month,
            day,
            hour,
            minute,
            second,
        } = self;
        write!(
            f,
            "{year:04}-{month:02}-{day:02}{sep}{hour:02}:{minute:02}:{second:02}{zone}"
        )
    }
}

impl fmt::Display for Utc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, 'T', "Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_dates_round_trip_across_leap_years_and_eras() {
        for days in [
            -800_000, -1, 0, 59, 60, 365, 11_016, 19_782, 19_783, 20_454, 2_000_000,
        ] {
            let (y, m, d) = civil_from_days(days);
            assert!(
                (1..=12).contains(&m) && (1..=31).contains(&d),
                "{days}: {y}-{m}-{d}"
            );
            assert_eq!(days_from_civil(y, m, d), days, "{days}: {y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn an_instant_shows_its_utc_fields() {
        use std::time::Duration;
        let t = Utc::of(UNIX_EPOCH + Duration::from_secs(1_796_118_062));
        assert_eq!(t.spaced(), "2026-12-01 09:41:02");
        assert_eq!(
            Utc::of(UNIX_EPOCH - Duration::from_secs(5)).to_string(),
            "1970-01-01T00:00:00Z"
        );
    }
}
