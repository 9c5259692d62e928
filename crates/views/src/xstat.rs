//! Reading stats by name from decoded planes (for the stats the engine's model does not
//! carry). Stat ids differ per plane, so names are resolved through the plane's metadata.

use std::collections::HashMap;

use xprof_proto::xplane::{XEvent, XPlane, XStat, x_stat};

/// A plane with its stat names indexed.
pub struct PlaneStats<'a> {
    pub plane: &'a XPlane,
    by_name: HashMap<&'a str, i64>,
}

impl<'a> PlaneStats<'a> {
    pub fn new(plane: &'a XPlane) -> Self {
        PlaneStats {
            plane,
            by_name: plane
                .stat_metadata
                .iter()
                .map(|(id, m)| (m.name.as_str(), *id))
                .collect(),
        }
    }

    pub fn id(&self, name: &str) -> Option<i64> {
        self.by_name.get(name).copied()
    }

    pub fn find<'s>(&self, stats: &'s [XStat], name: &str) -> Option<&'s XStat> {
        let id = self.id(name)?;
        stats.iter().find(|s| s.metadata_id == id)
    }

    /// An event's stat, else its metadata's (XProf `XEventVisitor::GetStat` semantics for
    /// the views that fall back to metadata).
    pub fn event_stat<'s>(&'s self, e: &'s XEvent, name: &str) -> Option<&'s XStat> {
        self.find(&e.stats, name).or_else(|| {
            self.plane
                .event_metadata
                .get(&e.metadata_id)
                .and_then(|m| self.find(&m.stats, name))
        })
    }

    pub fn plane_stat(&self, name: &str) -> Option<&XStat> {
        self.find(&self.plane.stats, name)
    }

    pub fn event_name(&self, e: &XEvent) -> &str {
        self.plane
            .event_metadata
            .get(&e.metadata_id)
            .map(|m| m.name.as_str())
            .unwrap_or("")
    }

    /// `StrOrRefValue`.
    pub fn str_of<'s>(&'s self, s: &'s XStat) -> Option<&'s str> {
        match s.value.as_ref()? {
            x_stat::Value::StrValue(v) => Some(v),
            x_stat::Value::RefValue(r) => self
                .plane
                .stat_metadata
                .get(&(*r as i64))
                .map(|m| m.name.as_str()),
            _ => None,
        }
    }
}

/// `IntOrUintValue` (doubles truncated, like the engine's accessor).
pub fn int_of(s: &XStat) -> Option<i64> {
    match s.value.as_ref()? {
        x_stat::Value::Int64Value(v) => Some(*v),
        x_stat::Value::Uint64Value(v) => Some(*v as i64),
        x_stat::Value::DoubleValue(v) => Some(*v as i64),
        _ => None,
    }
}

pub fn uint_of(s: &XStat) -> Option<u64> {
    match s.value.as_ref()? {
        x_stat::Value::Int64Value(v) => Some(*v as u64),
        x_stat::Value::Uint64Value(v) => Some(*v),
        x_stat::Value::DoubleValue(v) => Some(*v as u64),
        _ => None,
    }
}

pub fn double_of(s: &XStat) -> Option<f64> {
    match s.value.as_ref()? {
        x_stat::Value::DoubleValue(v) => Some(*v),
        x_stat::Value::Int64Value(v) => Some(*v as f64),
        x_stat::Value::Uint64Value(v) => Some(*v as f64),
        _ => None,
    }
}

pub fn bytes_of(s: &XStat) -> Option<&[u8]> {
    match s.value.as_ref()? {
        x_stat::Value::BytesValue(b) => Some(b),
        _ => None,
    }
}
