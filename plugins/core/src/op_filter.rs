//! The op filters of XProf's agent CLI (`--category_filter`, `--op_name`), shared by the op
//! tables, so that a call written for that CLI works here.

use serde_json::{Map, Value};
use xprof_plugin_api::{Call, Params, ToolError};

/// Which op-table rows a call keeps.
#[derive(Clone, Debug, Default)]
pub struct OpFilter {
    /// Case-insensitive substring of the row's category.
    pub category: Option<String>,
    /// An op name (see [`op_name_matches`]).
    pub op_name: Option<String>,
}

impl OpFilter {
    /// `category_filter`, and `op_name` when `with_op_name`.
    pub fn params(p: Params, with_op_name: bool) -> Params {
        let p = p.string(
            "category_filter",
            "Only ops whose HLO category contains this (case-insensitive), e.g. `fusion`.",
        );
        if with_op_name {
            p.string(
                "op_name",
                "Only this op: its name, a `/`-separated path suffix, or a base name (`fusion` matches `fusion.12`); `%`, `-`/`_` optional.",
            )
        } else {
            p
        }
    }

    pub fn from_call(call: &Call) -> Result<Self, ToolError> {
        Ok(OpFilter {
            category: call.opt_nonempty("category_filter")?,
            op_name: call.opt_nonempty("op_name")?,
        })
    }

    pub fn is_active(&self) -> bool {
        self.category.is_some() || self.op_name.is_some()
    }

    /// Whether `row` (an hlo_stats row: `category`, `hlo_op_name`) passes; `path` is the op's
    /// longer name (`<module>/<op>`) when the table has one.
    pub fn keep(&self, row: &Map<String, Value>, path: Option<&str>) -> bool {
        let text = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or("");
        if let Some(c) = &self.category
            && !text("category")
                .to_lowercase()
                .contains(&c.trim().to_lowercase())
        {
            return false;
        }
        match &self.op_name {
            Some(t) => op_name_matches(text("hlo_op_name"), path, t),
            None => true,
        }
    }

    /// Why nothing passed, naming the filters.
    pub fn nothing_matched(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.category {
            parts.push(format!("category_filter {c:?}"));
        }
        if let Some(o) = &self.op_name {
            parts.push(format!("op_name {o:?}"));
        }
        format!("no op matched {}", parts.join(" and "))
    }
}

/// XProf's agent-CLI op-name match: the target equals the name (or `path`), is a
/// `/`-separated suffix of either, or is the base of a numbered instruction (`fusion` →
/// `fusion.12`); a leading `%` is optional on both sides and `-`/`_` are interchangeable.
pub fn op_name_matches(name: &str, path: Option<&str>, target: &str) -> bool {
    let target = target.trim();
    if target.is_empty() {
        return true;
    }
    let leaf = name
        .rsplit('/')
        .next()
        .unwrap_or(name)
        .trim()
        .trim_start_matches('%');
    let mut candidates = vec![target.to_string()];
    for c in [target.replace('_', "-"), target.replace('-', "_")] {
        if !candidates.contains(&c) {
            candidates.push(c);
        }
    }
    candidates.iter().any(|c| {
        let suffix = format!("/{c}");
        let full = |n: &str| n == c || n.ends_with(&suffix);
        if full(name) || path.is_some_and(full) {
            return true;
        }
        let clean = c.trim_start_matches('%');
        leaf == clean || leaf.starts_with(&format!("{clean}."))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn op_names_match_as_xprofs_cli_does() {
        assert!(op_name_matches("fusion.12", None, "fusion"));
        assert!(op_name_matches("fusion.12", None, "%fusion.12"));
        assert!(!op_name_matches("fusion.12", None, "fusion.1"));
        assert!(op_name_matches("all-reduce.3", None, "all_reduce"));
        assert!(op_name_matches(
            "dot.4",
            Some("jit_step/dot.4"),
            "jit_step/dot.4"
        ));
        assert!(!op_name_matches("dot.4", None, "fus"));
    }

    #[test]
    fn rows_pass_on_category_and_name() {
        let row = json!({"category": "Loop Fusion", "hlo_op_name": "fusion.3"});
        let row = row.as_object().unwrap();
        let f = |c: Option<&str>, o: Option<&str>| OpFilter {
            category: c.map(String::from),
            op_name: o.map(String::from),
        };
        assert!(f(Some("fusion"), None).keep(row, None));
        assert!(!f(Some("convolution"), None).keep(row, None));
        assert!(f(Some("loop"), Some("fusion")).keep(row, None));
        assert!(!f(None, Some("copy")).keep(row, None));
    }
}
