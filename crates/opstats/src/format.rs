//! XProf's number formatting, so strings match the converters byte for byte.

/// `absl::StrCat(double)`: 6 significant digits, `%g` style (`946700`, `1525.5`,
/// `577.963`, `3.79754e+08`, `0`).
pub fn g6(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let exp = v.abs().log10().floor() as i32;
    // Rounding can carry into the next decade (999999.5 → 1e+06); recompute from the rounded
    // mantissa.
    let s = format!("{:.5e}", v);
    let (mant, e) = s.split_once('e').expect("exponent");
    let e: i32 = e.parse().unwrap_or(exp);
    if !(-5..6).contains(&e) {
        let m = trim_zeros(mant);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - e).max(0) as usize;
    trim_zeros(&format!("{:.*}", decimals, v)).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `OneDigit`: `%.1f`.
pub fn one_digit(v: f64) -> String {
    // C's printf spells the NaN XProf computes (0/0) "-nan".
    if v.is_nan() {
        return "-nan".into();
    }
    format!("{v:.1}")
}

/// The sample standard deviation as XProf's `tsl::Stat` computes it: 0 when all samples are
/// the same, else √((Σx² − (Σx)²/n)/(n − 1)). `Stat` starts its maximum at the smallest
/// positive double, so one sample of 0 is not "all the same": 0/0, NaN (XProf prints
/// "-nan"); one positive sample is 0.
pub fn sample_standard_deviation(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let max = v.iter().copied().fold(f64::MIN_POSITIVE, f64::max);
    let min = v.iter().copied().fold(f64::MAX, f64::min);
    if min == max {
        return 0.0;
    }
    let n = v.len() as f64;
    let sum: f64 = v.iter().sum();
    let sq: f64 = v.iter().map(|x| x * x).sum();
    let var = (sq - sum * sum / n) / (n - 1.0);
    // Two or more samples: rounding below 0 is a spread of 0, not a NaN.
    if v.len() > 1 {
        var.max(0.0).sqrt()
    } else {
        var.sqrt()
    }
}

#[cfg(test)]
mod sd_tests {
    use super::*;

    #[test]
    fn one_zero_sample_has_xprofs_nan_deviation_and_one_other_sample_none() {
        assert_eq!(one_digit(sample_standard_deviation(&[0.0])), "-nan");
        assert_eq!(one_digit(sample_standard_deviation(&[14.9])), "0.0");
        assert_eq!(one_digit(sample_standard_deviation(&[0.0, 0.0])), "0.0");
        assert!((sample_standard_deviation(&[1.0, 3.0]) - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(sample_standard_deviation(&[]), 0.0);
    }
}

/// `%.2f`.
pub fn two_digits(v: f64) -> String {
    format!("{v:.2}")
}

/// A percentage as XProf's overview prints it: one decimal and `%`.
pub fn percent(v: f64) -> String {
    format!("{v:.1}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_strcat_double() {
        assert_eq!(g6(946700.0), "946700");
        assert_eq!(g6(1637.993152512 / 1.073741824), "1525.5");
        assert_eq!(g6(577.9631), "577.963");
        assert_eq!(g6(379753672.0), "3.79754e+08");
        assert_eq!(g6(0.0), "0");
        assert_eq!(g6(1.0), "1");
        assert_eq!(g6(23296.0099876864 / 1.073741824), "21696.1");
        assert_eq!(g6(0.000123456), "0.000123456");
        assert_eq!(g6(999999.7), "1e+06");
        assert_eq!(percent(37.43957), "37.4%");
    }
}
