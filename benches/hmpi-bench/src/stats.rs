//! Order statistics over the repetitions of one measurement.
//!
//! The benchmark reports the median of its repetitions (robust against the
//! odd repetition that a busy machine disturbs) and keeps the minimum and
//! maximum to show how noisy the point was.
//!
//! # Example
//! ```ignore
//! assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
//! assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
//! assert_eq!(min(&[]), None);
//! ```

/// The median of `xs` (mean of the two middle values for an even count),
/// or `None` for an empty slice. NaNs sort last.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// The smallest value of `xs`, or `None` for an empty slice.
pub fn min(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().min_by(f64::total_cmp)
}

/// The largest value of `xs`, or `None` for an empty slice.
pub fn max(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().max_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn extremes() {
        assert_eq!(min(&[2.0, -1.0, 3.0]), Some(-1.0));
        assert_eq!(max(&[2.0, -1.0, 3.0]), Some(3.0));
        assert_eq!(max(&[]), None);
    }
}
