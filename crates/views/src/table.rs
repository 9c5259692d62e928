//! XProf DataTables as JSON records, and the small statistics helpers the views share.

use serde_json::{Map, Value};

/// One XProf DataTable: column ids in order, custom properties, rows as records.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub columns: Vec<String>,
    pub properties: Map<String, Value>,
    pub records: Vec<Map<String, Value>>,
}

impl Table {
    pub fn new(columns: &[&str]) -> Self {
        Table {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }
    }

    pub fn prop(&mut self, key: &str, value: impl Into<Value>) {
        self.properties.insert(key.to_string(), value.into());
    }

    /// `{"columns", "properties", "records"}`; `limit` = 0 keeps every record.
    pub fn to_json(&self, limit: usize) -> Value {
        let n = if limit == 0 {
            self.records.len()
        } else {
            limit.min(self.records.len())
        };
        let mut m = Map::new();
        m.insert(
            "columns".into(),
            Value::Array(
                self.columns
                    .iter()
                    .map(|c| Value::from(c.as_str()))
                    .collect(),
            ),
        );
        m.insert("properties".into(), Value::Object(self.properties.clone()));
        m.insert("total_records".into(), Value::from(self.records.len()));
        m.insert("truncated".into(), Value::from(n < self.records.len()));
        m.insert(
            "records".into(),
            Value::Array(
                self.records[..n]
                    .iter()
                    .cloned()
                    .map(Value::Object)
                    .collect(),
            ),
        );
        Value::Object(m)
    }
}

/// `tsl::Stat<double>` summarised as XProf's `GetStepSummaryForSampleStats`: mean, sample
/// standard deviation (n − 1), min, max; all 0 for no samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub average: f64,
    pub standard_deviation: f64,
    pub minimum: f64,
    pub maximum: f64,
    pub count: usize,
}

pub fn summarize(v: &[f64]) -> Summary {
    if v.is_empty() {
        return Summary::default();
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    Summary {
        average: mean,
        standard_deviation: xprof_opstats::format::sample_standard_deviation(v),
        minimum: v.iter().copied().fold(f64::INFINITY, f64::min),
        maximum: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        count: v.len(),
    }
}

pub fn ps_to_us(ps: u64) -> f64 {
    ps as f64 / 1e6
}

pub fn ps_to_ms(ps: u64) -> f64 {
    ps as f64 / 1e9
}

/// XProf's `SafeDivide`.
pub fn safe_div(a: f64, b: f64) -> f64 {
    xprof_opstats::metrics::safe_div(a, b)
}

/// Insert `key: null`, `key_reason` and (when known) `key_measured`.
pub fn placeholder(m: &mut Map<String, Value>, key: &str, reason: &str, measured: Option<Value>) {
    m.insert(key.into(), Value::Null);
    m.insert(format!("{key}_reason"), Value::from(reason));
    if let Some(v) = measured {
        m.insert(format!("{key}_measured"), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_standard_deviation() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.average, 5.0);
        // Σ(x−5)² = 32 over n−1 = 7.
        assert!((s.standard_deviation - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!((s.minimum, s.maximum, s.count), (2.0, 9.0, 8));
        assert_eq!(summarize(&[]), Summary::default());
        assert_eq!(summarize(&[3.0]).standard_deviation, 0.0);
    }
}
