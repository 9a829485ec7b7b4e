//! Medians, minima and maxima over runs.

use serde::Serialize;

/// Median, min and max of a set of samples (one sample per run, or per step).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Stat {
    /// The median (mean of the two middle samples for an even count).
    pub median: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// How many samples.
    pub n: usize,
}

impl Stat {
    /// The statistic of `samples`; `None` when there are none (or only NaNs).
    pub fn of(samples: &[f64]) -> Option<Self> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Self {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// The median of `samples`, or NaN when there are none.
    pub fn median_of(samples: &[f64]) -> f64 {
        Self::of(samples).map_or(f64::NAN, |s| s.median)
    }
}

#[cfg(test)]
mod tests {
    use super::Stat;

    #[test]
    fn odd_even_and_empty() {
        let s = Stat::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Stat::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert!(Stat::of(&[]).is_none());
        assert!(Stat::median_of(&[f64::NAN]).is_nan());
    }
}
