//! `spec.schedule` in `spec.timeZone`: parsing (with the field named in every error) and the
//! scheduled times before and after an instant. Pure.
//!
//! The cron dialect is CronJob's: five fields (minute hour day-of-month month day-of-week),
//! names of months and weekdays, ranges, lists and steps, the `@yearly` ... `@hourly`
//! nicknames, and a day that matches when *either* the day of month or the day of week does
//! (when both are restricted), as Vixie cron. Parsed by `croner`, which also accepts its own
//! extensions (`L`, `W`, `#`); seconds and years are refused, as CronJob does.
//!
//! Time zones and daylight saving, as `croner` resolves them: a time that falls in a gap
//! (spring forward) runs at the first instant after the gap; a time repeated by a fall-back
//! runs once, at its first occurrence. Schedules of every hour or minute (`*` in the hour
//! field) follow real time through both.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// A parsed schedule: when, and in which zone.
#[derive(Clone, Debug)]
pub struct Schedule {
    cron: Cron,
    tz: Tz,
}

/// What is wrong with the schedule, and in which field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// `spec.schedule` or `spec.timeZone`.
    pub field: &'static str,
    /// What is wrong, for the `Valid` condition.
    pub message: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Longest search for a next time: a schedule that matches no date (`0 0 30 2 *`) would
/// otherwise make `croner` search to its year limit on every pass.
const SEARCH_YEARS: i64 = 8;

impl Schedule {
    /// Parse `schedule` (cron) and `time_zone` (IANA name, default UTC).
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Schedule, Invalid> {
        let tz = match time_zone {
            None => Tz::UTC,
            Some(name) => name.parse::<Tz>().map_err(|_| Invalid {
                field: "spec.timeZone",
                message: format!(
                    "unknown time zone {name:?}: give an IANA name such as \"Europe/Berlin\" or \"UTC\""
                ),
            })?,
        };
        let bad = |message: String| Invalid {
            field: "spec.schedule",
            message,
        };
        let text = schedule.trim();
        if text.contains("TZ=") {
            return Err(bad(
                "give the time zone in spec.timeZone, not as TZ= or CRON_TZ= in the schedule"
                    .into(),
            ));
        }
        // croner knows every CronJob nickname but this one.
        let text = if text.eq_ignore_ascii_case("@midnight") {
            "@daily"
        } else {
            text
        };
        if !text.starts_with('@') {
            let fields = text.split_whitespace().count();
            if fields != 5 {
                return Err(bad(format!(
                    "{schedule:?} has {fields} fields; expected 5 (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly"
                )));
            }
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .dom_and_dow(false)
            .build()
            .parse(text)
            .map_err(|e| bad(format!("{schedule:?} is not a cron schedule: {e}")))?;
        let s = Schedule { cron, tz };
        // A schedule that never fires (February 30th) is as useless as one that does not parse.
        let now = Utc::now();
        if s.next_after(now).is_none() {
            return Err(bad(format!(
                "{schedule:?} matches no time in the next {SEARCH_YEARS} years"
            )));
        }
        Ok(s)
    }

    /// The time zone.
    pub fn tz(&self) -> Tz {
        self.tz
    }

    /// The first scheduled time strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = t.with_timezone(&self.tz);
        let next = self.cron.find_next_occurrence(&local, false).ok()?;
        let next = next.with_timezone(&Utc);
        (next - t <= chrono::Duration::days(366 * SEARCH_YEARS)).then_some(next)
    }

    /// The last scheduled time at or before `t`.
    pub fn last_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = t.with_timezone(&self.tz);
        let prev = self.cron.find_previous_occurrence(&local, true).ok()?;
        let prev = prev.with_timezone(&Utc);
        (t - prev <= chrono::Duration::days(366 * SEARCH_YEARS)).then_some(prev)
    }

    /// Scheduled times in `(after, until]`, counted up to `limit` (the count stops there).
    pub fn count_between(&self, after: DateTime<Utc>, until: DateTime<Utc>, limit: usize) -> usize {
        let mut n = 0;
        let mut t = after;
        while n < limit {
            match self.next_after(t) {
                Some(next) if next <= until => {
                    n += 1;
                    t = next;
                }
                _ => break,
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .expect("time")
            .with_timezone(&Utc)
    }

    #[test]
    fn every_minute_and_nicknames() {
        let s = Schedule::parse("* * * * *", None).expect("parses");
        assert_eq!(
            s.next_after(utc("2026-01-01T10:00:30Z")),
            Some(utc("2026-01-01T10:01:00Z"))
        );
        // Strictly after: a time exactly on the schedule gives the next one.
        assert_eq!(
            s.next_after(utc("2026-01-01T10:01:00Z")),
            Some(utc("2026-01-01T10:02:00Z"))
        );
        assert_eq!(
            s.last_at_or_before(utc("2026-01-01T10:01:00Z")),
            Some(utc("2026-01-01T10:01:00Z"))
        );
        for (nick, after, want) in [
            ("@hourly", "2026-01-01T10:00:30Z", "2026-01-01T11:00:00Z"),
            ("@daily", "2026-01-01T10:00:00Z", "2026-01-02T00:00:00Z"),
            ("@midnight", "2026-01-01T10:00:00Z", "2026-01-02T00:00:00Z"),
            // 2026-01-01 is a Thursday: the next Sunday is the 4th.
            ("@weekly", "2026-01-01T10:00:00Z", "2026-01-04T00:00:00Z"),
            ("@monthly", "2026-01-01T10:00:00Z", "2026-02-01T00:00:00Z"),
            ("@yearly", "2026-01-01T10:00:00Z", "2027-01-01T00:00:00Z"),
        ] {
            let s = Schedule::parse(nick, None).expect(nick);
            assert_eq!(s.next_after(utc(after)), Some(utc(want)), "{nick}");
        }
    }

    #[test]
    fn day_of_month_or_day_of_week_as_vixie_cron() {
        // The 15th, or any Monday: 2026-01-05 is a Monday, before the 15th.
        let s = Schedule::parse("0 3 15 * MON", None).expect("parses");
        assert_eq!(
            s.next_after(utc("2026-01-01T00:00:00Z")),
            Some(utc("2026-01-05T03:00:00Z"))
        );
        assert_eq!(
            s.next_after(utc("2026-01-12T04:00:00Z")),
            Some(utc("2026-01-15T03:00:00Z"))
        );
    }

    #[test]
    fn time_zone_moves_the_times() {
        let s = Schedule::parse("30 2 * * *", Some("Europe/Berlin")).expect("parses");
        // Winter: Berlin is UTC+1.
        assert_eq!(
            s.next_after(utc("2026-01-10T00:00:00Z")),
            Some(utc("2026-01-10T01:30:00Z"))
        );
        // Summer: UTC+2.
        assert_eq!(
            s.next_after(utc("2026-07-10T00:00:00Z")),
            Some(utc("2026-07-10T00:30:00Z"))
        );
    }

    #[test]
    fn spring_forward_gap_runs_once_after_the_gap() {
        // 2026-03-29 in Berlin: 02:00 jumps to 03:00, so 02:30 does not exist that day.
        let s = Schedule::parse("30 2 * * *", Some("Europe/Berlin")).expect("parses");
        let day_before = utc("2026-03-28T12:00:00Z");
        let next = s.next_after(day_before).expect("a time");
        // 03:00 CEST = 01:00 UTC, the first instant after the gap.
        assert_eq!(next, utc("2026-03-29T01:00:00Z"));
        // And it runs once that day: the next is the 30th at 02:30 CEST.
        assert_eq!(s.next_after(next), Some(utc("2026-03-30T00:30:00Z")));
    }

    #[test]
    fn fall_back_overlap_runs_once() {
        // 2026-10-25 in Berlin: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
        let s = Schedule::parse("30 2 * * *", Some("Europe/Berlin")).expect("parses");
        let first = s.next_after(utc("2026-10-24T12:00:00Z")).expect("a time");
        assert_eq!(first, utc("2026-10-25T00:30:00Z"), "the first 02:30 (CEST)");
        assert_eq!(
            s.next_after(first),
            Some(utc("2026-10-26T01:30:00Z")),
            "not again at the second 02:30 (CET)"
        );
        // An hourly schedule follows real time through the repeated hour: 24+1 runs that day.
        let h = Schedule::parse("0 * * * *", Some("Europe/Berlin")).expect("parses");
        let n = h.count_between(
            utc("2026-10-24T22:00:00Z"),
            utc("2026-10-25T23:00:00Z"),
            1000,
        );
        assert_eq!(n, 25);
    }

    #[test]
    fn counting_stops_at_the_limit() {
        let s = Schedule::parse("* * * * *", None).expect("parses");
        let t = utc("2026-01-01T00:00:00Z");
        assert_eq!(s.count_between(t, t + chrono::Duration::minutes(5), 101), 5);
        assert_eq!(s.count_between(t, t + chrono::Duration::days(3), 101), 101);
        assert_eq!(s.count_between(t, t, 101), 0);
    }

    #[test]
    fn errors_name_the_field() {
        let e = Schedule::parse("* * * *", None).expect_err("4 fields");
        assert_eq!(e.field, "spec.schedule");
        assert!(e.message.contains("4 fields"), "{e}");
        let e = Schedule::parse("0 * * * * *", None).expect_err("seconds");
        assert_eq!(e.field, "spec.schedule");
        let e = Schedule::parse("61 * * * *", None).expect_err("minute 61");
        assert_eq!(e.field, "spec.schedule");
        assert!(e.to_string().starts_with("spec.schedule: "), "{e}");
        let e = Schedule::parse("0 0 30 2 *", None).expect_err("February 30th");
        assert!(e.message.contains("matches no time"), "{e}");
        let e = Schedule::parse("TZ=UTC 0 * * * *", None).expect_err("TZ=");
        assert!(e.message.contains("spec.timeZone"), "{e}");
        let e = Schedule::parse("@hourly", Some("Mars/Olympus")).expect_err("zone");
        assert_eq!(e.field, "spec.timeZone");
        assert!(e.message.contains("Mars/Olympus"), "{e}");
    }
}
