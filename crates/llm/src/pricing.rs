//! Prices and cost: the one place every front end turns token usage into US dollars.
//!
//! A route's [`ModelPricing`] (on [`crate::ModelInfo`]) prices the three things DeepSeek bills:
//! input served from the prefix cache, input that missed it, and output (reasoning included);
//! plus input written to the cache (Anthropic bills writes) and an optional daily off-peak
//! window (UTC) with its own rates, applied by [`ModelPricing::cost_at`] / [`UsageTally::add_at`].
//! Amounts are kept as exact integers (micro-dollars per million tokens; pico-dollars of cost),
//! so totals do not drift and the types stay `Eq`.

use std::time::SystemTime;

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::TokenUsage;

/// A price in US dollars per million tokens, held exactly in micro-dollars per million tokens.
/// Serialised as a JSON number of dollars (`0.28`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsdPerMTok(u64);

impl UsdPerMTok {
    /// A price of `micros` micro-dollars per million tokens.
    pub const fn from_micros(micros: u64) -> Self {
        UsdPerMTok(micros)
    }

    /// A price in dollars per million tokens (rounded to the micro-dollar); `None` when negative
    /// or not finite.
    pub fn from_usd(usd: f64) -> Option<Self> {
        (usd.is_finite() && usd >= 0.0).then(|| UsdPerMTok((usd * 1_000_000.0).round() as u64))
    }

    /// Micro-dollars per million tokens.
    pub const fn micros(self) -> u64 {
        self.0
    }

    /// Dollars per million tokens.
    pub fn usd(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }

    /// The cost of `tokens` tokens at this price.
    pub fn of(self, tokens: u64) -> Cost {
        // micro-dollars per 1e6 tokens × tokens = pico-dollars.
        Cost(u128::from(self.0) * u128::from(tokens))
    }
}

impl JsonSchema for UsdPerMTok {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "UsdPerMTok".into()
    }
    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "number", "minimum": 0, "description": "USD per million tokens."})
    }
}

impl JsonSchema for TimeOfDay {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "TimeOfDay".into()
    }
    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$", "description": "UTC time of day, `HH:MM`."})
    }
}

impl Serialize for UsdPerMTok {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.usd())
    }
}

impl<'de> Deserialize<'de> for UsdPerMTok {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let usd = f64::deserialize(d)?;
        UsdPerMTok::from_usd(usd).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "a price must be a non-negative number of USD per million tokens, got {usd}"
            ))
        })
    }
}

/// One set of rates, per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rates {
    /// Input served from the prefix cache.
    pub cache_hit_input: UsdPerMTok,
    /// Input that missed the cache.
    pub cache_miss_input: UsdPerMTok,
    /// Input written to the cache (Anthropic bills it; the cache-miss rate when unset).
    pub cache_write_input: UsdPerMTok,
    /// Output (reasoning included).
    pub output: UsdPerMTok,
}

impl Rates {
    /// The cost of one attempt's usage at these rates. `usage.input_tokens` counts the input
    /// that was neither read from nor written to the cache; `cache_read_tokens` and
    /// `cache_write_tokens` the rest.
    pub fn cost(&self, usage: &TokenUsage) -> Cost {
        self.cache_miss_input.of(usage.input_tokens)
            + self
                .cache_hit_input
                .of(usage.cache_read_tokens.unwrap_or(0))
            + self
                .cache_write_input
                .of(usage.cache_write_tokens.unwrap_or(0))
            + self.output.of(usage.output_tokens)
    }
}

/// What a route charges, per million tokens: DeepSeek's three-part billing (cache hit, cache
/// miss, output), Anthropic's cache writes, and an optional daily window with other rates
/// (DeepSeek's former off-peak discount; its current list has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPricing {
    /// Input tokens served from the prefix cache.
    pub cache_hit_input: UsdPerMTok,
    /// Input tokens that missed the cache.
    pub cache_miss_input: UsdPerMTok,
    /// Output tokens (reasoning included).
    pub output: UsdPerMTok,
    /// Input tokens written to the cache (absent: billed as cache misses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_input: Option<UsdPerMTok>,
    /// A daily window (UTC) with its own rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_peak: Option<OffPeak>,
}

impl ModelPricing {
    /// Flat prices: no cache-write price, no off-peak window.
    pub const fn new(
        cache_hit_input: UsdPerMTok,
        cache_miss_input: UsdPerMTok,
        output: UsdPerMTok,
    ) -> Self {
        Self {
            cache_hit_input,
            cache_miss_input,
            output,
            cache_write_input: None,
            off_peak: None,
        }
    }

    /// With a cache-write price.
    pub const fn with_cache_write(mut self, price: UsdPerMTok) -> Self {
        self.cache_write_input = Some(price);
        self
    }

    /// With an off-peak window.
    pub const fn with_off_peak(mut self, off_peak: OffPeak) -> Self {
        self.off_peak = Some(off_peak);
        self
    }

    /// The standard rates (outside any off-peak window).
    pub fn standard(&self) -> Rates {
        Rates {
            cache_hit_input: self.cache_hit_input,
            cache_miss_input: self.cache_miss_input,
            cache_write_input: self.cache_write_input.unwrap_or(self.cache_miss_input),
            output: self.output,
        }
    }

    /// The rates in force at `at`: the off-peak ones inside the window, else the standard ones.
    pub fn rates_at(&self, at: SystemTime) -> Rates {
        match &self.off_peak {
            Some(o) if o.window.contains(at) => o.rates(),
            _ => self.standard(),
        }
    }

    /// The cost of one attempt's usage at the standard rates. Use [`ModelPricing::cost_at`]
    /// when the attempt's time is known (off-peak windows).
    pub fn cost(&self, usage: &TokenUsage) -> Cost {
        self.standard().cost(usage)
    }

    /// The cost of one attempt's usage at the rates in force at `at`.
    pub fn cost_at(&self, usage: &TokenUsage, at: SystemTime) -> Cost {
        self.rates_at(at).cost(usage)
    }
}

/// Rates that apply inside a daily window (all four rates given; the cache-write rate defaults to
/// the window's cache-miss rate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OffPeak {
    /// When the rates apply.
    pub window: DailyWindow,
    /// Input served from the cache.
    pub cache_hit_input: UsdPerMTok,
    /// Input that missed the cache.
    pub cache_miss_input: UsdPerMTok,
    /// Output.
    pub output: UsdPerMTok,
    /// Input written to the cache (absent: the window's cache-miss rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_input: Option<UsdPerMTok>,
}

impl OffPeak {
    /// The window's rates.
    pub fn rates(&self) -> Rates {
        Rates {
            cache_hit_input: self.cache_hit_input,
            cache_miss_input: self.cache_miss_input,
            cache_write_input: self.cache_write_input.unwrap_or(self.cache_miss_input),
            output: self.output,
        }
    }
}

/// A time of day in UTC, to the minute (`"16:30"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimeOfDay(u16);

impl TimeOfDay {
    /// `hour:minute` (UTC); `None` outside `00:00..=23:59`.
    pub const fn new(hour: u16, minute: u16) -> Option<Self> {
        if hour < 24 && minute < 60 {
            Some(TimeOfDay(hour * 60 + minute))
        } else {
            None
        }
    }

    /// Minutes since midnight.
    pub const fn minutes(self) -> u16 {
        self.0
    }

    /// The time of day of `at` (UTC); instants before 1970 count as midnight.
    pub fn of(at: SystemTime) -> Self {
        let secs = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        TimeOfDay(((secs / 60) % MINUTES_PER_DAY) as u16)
    }
}

const MINUTES_PER_DAY: u64 = 24 * 60;

impl std::fmt::Display for TimeOfDay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02}:{:02}", self.0 / 60, self.0 % 60)
    }
}

/// A text that is not an `HH:MM` time of day (the text).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a time of day must be `HH:MM` (UTC, 00:00..23:59), got `{0}`")]
pub struct BadTimeOfDay(pub String);

impl std::str::FromStr for TimeOfDay {
    type Err = BadTimeOfDay;
    fn from_str(s: &str) -> Result<Self, BadTimeOfDay> {
        let bad = || BadTimeOfDay(s.to_owned());
        let (h, m) = s.split_once(':').ok_or_else(bad)?;
        if h.len() != 2 || m.len() != 2 {
            return Err(bad());
        }
        let h: u16 = h.parse().map_err(|_| bad())?;
        let m: u16 = m.parse().map_err(|_| bad())?;
        TimeOfDay::new(h, m).ok_or_else(bad)
    }
}

impl Serialize for TimeOfDay {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TimeOfDay {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A daily window `[start, end)` in UTC; `end` before `start` wraps past midnight
/// (`16:30`–`00:30`). `start == end` is refused (an empty or ambiguous window).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DailyWindow {
    /// First minute inside the window.
    pub start: TimeOfDay,
    /// First minute after it.
    pub end: TimeOfDay,
}

impl DailyWindow {
    /// `[start, end)`; `None` when they are equal.
    pub fn new(start: TimeOfDay, end: TimeOfDay) -> Option<Self> {
        (start != end).then_some(Self { start, end })
    }

    /// Whether `at` falls inside the window.
    pub fn contains(&self, at: SystemTime) -> bool {
        let m = TimeOfDay::of(at);
        if self.start < self.end {
            self.start <= m && m < self.end
        } else {
            m >= self.start || m < self.end
        }
    }
}

impl<'de> Deserialize<'de> for DailyWindow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            start: TimeOfDay,
            end: TimeOfDay,
        }
        let r = Raw::deserialize(d)?;
        DailyWindow::new(r.start, r.end).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "an off-peak window needs different start and end times, got {} to {}",
                r.start, r.end
            ))
        })
    }
}

/// An exact amount of US dollars (pico-dollars internally).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(u128);

impl Cost {
    /// Nothing.
    pub const ZERO: Cost = Cost(0);

    /// Pico-dollars.
    pub const fn picos(self) -> u128 {
        self.0
    }

    /// Dollars.
    pub fn usd(self) -> f64 {
        self.0 as f64 / 1e12
    }
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, rhs: Cost) -> Cost {
        Cost(self.0.saturating_add(rhs.0))
    }
}

impl std::ops::AddAssign for Cost {
    fn add_assign(&mut self, rhs: Cost) {
        *self = *self + rhs;
    }
}

impl std::fmt::Display for Cost {
    /// `$0.0123` (four decimals; six under a cent so small sessions are not shown as zero).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let usd = self.usd();
        if usd != 0.0 && usd < 0.01 {
            write!(f, "${usd:.6}")
        } else {
            write!(f, "${usd:.4}")
        }
    }
}

/// Token usage and cost folded over many attempts (a turn, a session).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageTally {
    /// Uncached input tokens.
    pub cache_miss_input: u64,
    /// Cached input tokens.
    pub cache_hit_input: u64,
    /// Input tokens written to the cache.
    pub cache_write_input: u64,
    /// Output tokens.
    pub output: u64,
    /// Attempts that reported usage.
    pub attempts: u64,
    /// Cost of the usage whose route had prices.
    pub cost: Cost,
    /// Attempts whose route had no prices (their cost is not in `cost`).
    pub unpriced: u64,
}

impl UsageTally {
    /// Folds one attempt's usage, priced at the standard rates of `pricing` when the route has
    /// prices.
    pub fn add(&mut self, usage: &TokenUsage, pricing: Option<&ModelPricing>) {
        self.fold(usage, pricing.map(ModelPricing::standard));
    }

    /// Folds one attempt's usage made at `at`, priced at the rates of `pricing` in force then
    /// (off-peak windows).
    pub fn add_at(&mut self, usage: &TokenUsage, pricing: Option<&ModelPricing>, at: SystemTime) {
        self.fold(usage, pricing.map(|p| p.rates_at(at)));
    }

    fn fold(&mut self, usage: &TokenUsage, rates: Option<Rates>) {
        self.cache_miss_input += usage.input_tokens;
        self.cache_hit_input += usage.cache_read_tokens.unwrap_or(0);
        self.cache_write_input += usage.cache_write_tokens.unwrap_or(0);
        self.output += usage.output_tokens;
        self.attempts += 1;
        match rates {
            Some(r) => self.cost += r.cost(usage),
            None => self.unpriced += 1,
        }
    }

    /// Folds another tally.
    pub fn merge(&mut self, other: &UsageTally) {
        self.cache_miss_input += other.cache_miss_input;
        self.cache_hit_input += other.cache_hit_input;
        self.cache_write_input += other.cache_write_input;
        self.output += other.output;
        self.attempts += other.attempts;
        self.cost += other.cost;
        self.unpriced += other.unpriced;
    }

    /// All input tokens (read from the cache, written to it, and neither).
    pub fn input(&self) -> u64 {
        self.cache_miss_input + self.cache_hit_input + self.cache_write_input
    }

    /// Share of input served from the cache, in `0.0..=1.0` (`None` before any input).
    pub fn cache_hit_ratio(&self) -> Option<f64> {
        let input = self.input();
        (input > 0).then(|| self.cache_hit_input as f64 / input as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(miss: u64, hit: u64, out: u64) -> TokenUsage {
        TokenUsage {
            input_tokens: miss,
            output_tokens: out,
            total_tokens: None,
            cache_read_tokens: Some(hit),
            cache_write_tokens: None,
            reasoning_tokens: None,
        }
    }

    const P: ModelPricing = ModelPricing::new(
        UsdPerMTok::from_micros(28_000),
        UsdPerMTok::from_micros(280_000),
        UsdPerMTok::from_micros(420_000),
    );

    #[test]
    fn cost_prices_hit_miss_and_output_separately() {
        // 1M miss = $0.28, 1M hit = $0.028, 1M out = $0.42.
        let c = P.cost(&usage(1_000_000, 1_000_000, 1_000_000));
        assert_eq!(c.picos(), 728_000_000_000);
        assert_eq!(format!("{c}"), "$0.7280");
        assert_eq!(format!("{}", P.cost(&usage(100, 0, 0))), "$0.000028");
        assert_eq!(format!("{}", Cost::ZERO), "$0.0000");
    }

    #[test]
    fn tally_folds_usage_and_ratio() {
        let mut t = UsageTally::default();
        assert_eq!(t.cache_hit_ratio(), None);
        t.add(&usage(100, 900, 50), Some(&P));
        t.add(&usage(100, 0, 50), None);
        assert_eq!(t.input(), 1100);
        assert_eq!(t.output, 100);
        assert_eq!(t.unpriced, 1);
        assert_eq!(t.attempts, 2);
        assert!((t.cache_hit_ratio().unwrap() - 900.0 / 1100.0).abs() < 1e-9);
        assert_eq!(t.cost, P.cost(&usage(100, 900, 50)));
    }

    #[test]
    fn prices_round_trip_as_dollars_and_reject_negatives() {
        let json = serde_json::to_string(&P).unwrap();
        assert_eq!(
            json,
            r#"{"cacheHitInput":0.028,"cacheMissInput":0.28,"output":0.42}"#
        );
        let back: ModelPricing = serde_json::from_str(&json).unwrap();
        assert_eq!(back, P);
        let err = serde_json::from_str::<ModelPricing>(
            r#"{"cacheHitInput":-1,"cacheMissInput":0.28,"output":0.42}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("non-negative"), "{err}");
    }

    fn at(h: u64, m: u64) -> SystemTime {
        // 2026-12-02 00:00 UTC plus h:m.
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_796_169_600 + h * 3600 + m * 60)
    }

    #[test]
    fn cache_writes_are_priced_at_their_rate_else_as_misses() {
        let u = TokenUsage {
            cache_write_tokens: Some(1_000_000),
            ..usage(0, 0, 0)
        };
        assert_eq!(P.cost(&u), P.cache_miss_input.of(1_000_000));
        let anth = ModelPricing::new(
            UsdPerMTok::from_micros(300_000),
            UsdPerMTok::from_micros(3_000_000),
            UsdPerMTok::from_micros(15_000_000),
        )
        .with_cache_write(UsdPerMTok::from_micros(3_750_000));
        // 1M written $3.75 + 1M read $0.30 + 1M other input $3 + 1M out $15.
        let u = TokenUsage {
            cache_write_tokens: Some(1_000_000),
            ..usage(1_000_000, 1_000_000, 1_000_000)
        };
        assert_eq!(anth.cost(&u).picos(), 22_050_000_000_000);
        let mut t = UsageTally::default();
        t.add(&u, Some(&anth));
        assert_eq!((t.cache_write_input, t.input()), (1_000_000, 3_000_000));
        let json = serde_json::to_string(&anth).unwrap();
        assert_eq!(
            json,
            r#"{"cacheHitInput":0.3,"cacheMissInput":3.0,"output":15.0,"cacheWriteInput":3.75}"#
        );
        assert_eq!(serde_json::from_str::<ModelPricing>(&json).unwrap(), anth);
    }

    #[test]
    fn off_peak_window_wraps_midnight_and_prices_by_time() {
        let json = r#"{"cacheHitInput":0.07,"cacheMissInput":0.27,"output":1.1,
            "offPeak":{"window":{"start":"16:30","end":"00:30"},
                       "cacheHitInput":0.035,"cacheMissInput":0.135,"output":0.55}}"#;
        let p: ModelPricing = serde_json::from_str(json).unwrap();
        let o = p.off_peak.unwrap();
        assert_eq!(o.window.start.to_string(), "16:30");
        for (h, m, inside) in [
            (16, 29, false),
            (16, 30, true),
            (23, 59, true),
            (0, 0, true),
            (0, 29, true),
            (0, 30, false),
            (12, 0, false),
        ] {
            assert_eq!(o.window.contains(at(h, m)), inside, "{h:02}:{m:02}");
        }
        let u = usage(1_000_000, 1_000_000, 1_000_000);
        // Standard: 0.27 + 0.07 + 1.1 = $1.44; off-peak half of it.
        assert_eq!(p.cost_at(&u, at(12, 0)).picos(), 1_440_000_000_000);
        assert_eq!(p.cost_at(&u, at(20, 0)).picos(), 720_000_000_000);
        assert_eq!(p.cost(&u), p.cost_at(&u, at(12, 0)));
        let mut t = UsageTally::default();
        t.add_at(&u, Some(&p), at(20, 0));
        t.add_at(&u, Some(&p), at(9, 15));
        assert_eq!(t.cost.picos(), 2_160_000_000_000);
        // A window inside one day.
        let day =
            DailyWindow::new(TimeOfDay::new(1, 0).unwrap(), TimeOfDay::new(2, 0).unwrap()).unwrap();
        assert!(day.contains(at(1, 0)) && !day.contains(at(2, 0)) && !day.contains(at(0, 59)));
        // Round trip.
        let back: ModelPricing = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn bad_windows_are_refused_with_what_is_wrong() {
        let w = |start: &str, end: &str| {
            serde_json::from_str::<DailyWindow>(&format!(r#"{{"start":"{start}","end":"{end}"}}"#))
                .map_err(|e| e.to_string())
        };
        assert!(w("24:00", "01:00").unwrap_err().contains("`HH:MM`"));
        assert!(w("1:00", "02:00").unwrap_err().contains("got `1:00`"));
        assert!(
            w("16:30", "16:30")
                .unwrap_err()
                .contains("different start and end")
        );
        assert!(w("16:30", "00:30").is_ok());
    }
}
