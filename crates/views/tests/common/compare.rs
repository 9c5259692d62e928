//! Field-by-field comparison of our views with XProf's, counted: every field XProf prints is
//! compared, and is equal, one of our documented placeholders, or a difference.

use std::path::Path;

use serde_json::{Map, Value};
use xprof_views::table::Table;

use super::{oracle_opt, same};

/// What a comparison found.
#[derive(Default)]
pub struct Tally {
    /// Fields XProf prints that were compared.
    pub compared: usize,
    /// Of those, equal to ours (numbers to 1e-6 relative).
    pub equal: usize,
    /// Of those, our placeholder (`null` + `<field>_reason`) where XProf prints its 0.
    pub placeholders: usize,
    /// The others: (key without values, the difference with values).
    pub diffs: Vec<(String, String)>,
}

impl Tally {
    fn differ(&mut self, key: String, detail: String) {
        self.diffs.push((key, detail));
    }

    /// The differences, one per line.
    pub fn report(&self) -> String {
        let lines: Vec<&str> = self.diffs.iter().map(|(_, d)| d.as_str()).collect();
        lines.join("\n")
    }

    /// Every field XProf prints in `theirs` against ours: equal (numbers to 1e-6), or ours is
    /// one of our placeholders (null with a `<field>_reason`) where XProf printed a 0.
    pub fn fields(&mut self, ctx: &str, ours: &Map<String, Value>, theirs: &Map<String, Value>) {
        for (k, v) in theirs {
            self.compared += 1;
            let o = ours.get(k).unwrap_or(&Value::Null);
            // XProf's source cell is HTML: the stack as the title of a div around `file:line`.
            if k == "source_info" {
                let shown = v.as_str().and_then(|h| {
                    let inner = h.rsplit_once("'>")?.1;
                    inner.strip_suffix("</div>")
                });
                let theirs_text = shown.map_or(v.clone(), Value::from);
                if o == &theirs_text {
                    self.equal += 1;
                } else {
                    self.differ(
                        format!("{ctx} {k}"),
                        format!("{ctx} {k}: ours {o} vs XProf {theirs_text}"),
                    );
                }
                continue;
            }
            let placeholder = o.is_null() && ours.get(&format!("{k}_reason")).is_some();
            if placeholder && zero_like(v) {
                self.placeholders += 1;
                continue;
            }
            let ok = if let (Value::Array(a), Value::Array(b)) = (o, v) {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
            } else {
                same(o, v)
            };
            if ok {
                self.equal += 1;
            } else {
                self.differ(
                    format!("{ctx} {k}"),
                    format!("{ctx} {k}: ours {o} vs XProf {v}"),
                );
            }
        }
    }

    /// A structural difference (a missing row, another row count): one compared field.
    pub fn structure(&mut self, ctx: &str, what: &str, ok: bool, detail: String) {
        self.compared += 1;
        if ok {
            self.equal += 1;
        } else {
            self.differ(format!("{ctx} {what}"), format!("{ctx} {what}: {detail}"));
        }
    }

    /// A table of ours against XProf's DataTable (`{cols, rows, p}`): columns, rows by index,
    /// every cell and property.
    pub fn table(&mut self, ctx: &str, ours: &Table, theirs: &Value) {
        let cols: Vec<&str> = theirs["cols"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c["id"].as_str()).collect())
            .unwrap_or_default();
        self.structure(
            ctx,
            "columns",
            ours.columns == cols,
            format!("ours {:?} vs XProf {cols:?}", ours.columns),
        );
        let rows = table_rows(theirs);
        self.structure(
            ctx,
            "row count",
            ours.records.len() == rows.len(),
            format!("ours {} vs XProf {}", ours.records.len(), rows.len()),
        );
        for (i, (r, row)) in ours.records.iter().zip(&rows).enumerate() {
            self.fields(&format!("{ctx} row {i}"), r, row);
        }
        if let Some(p) = theirs["p"].as_object() {
            self.fields(&format!("{ctx} property"), &ours.properties, p);
        }
    }
}

/// XProf's DataTable as rows of column id → value.
pub fn table_rows(t: &Value) -> Vec<Map<String, Value>> {
    let ids: Vec<&str> = t["cols"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["id"].as_str()).collect())
        .unwrap_or_default();
    t["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    ids.iter()
                        .zip(r["c"].as_array().into_iter().flatten())
                        .map(|(id, c)| (id.to_string(), c.get("v").cloned().unwrap_or(Value::Null)))
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A value XProf prints where it has nothing to measure: 0 in any of its spellings.
pub fn zero_like(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.trim_end_matches('%').parse::<f64>() == Ok(0.0),
        Value::Array(a) => a.iter().all(zero_like),
        _ => false,
    }
}

/// hlo_stats, the roofline model, the overview's analysis fields and the op profile (both
/// groupings, with and without idle) of one capture against XProf's.
pub fn compare_op_views(
    name: &str,
    s: &xprof_opstats::opstats::OpStats,
    oracle_dir: &Path,
    tally: &mut Tally,
) {
    // XProf shows no op views for a CPU capture; ours are the host-executed ops.
    let host_executed = xprof_opstats::views::op_db(s).is_some_and(|(_, h)| h);
    if let Some(o) = oracle_opt(oracle_dir, "hlo_stats") {
        let theirs = table_rows(&o);
        if !(host_executed && theirs.is_empty()) {
            let ours = xprof_opstats::views::hlo_stats_of(s, &s.device_db);
            tally.structure(
                &format!("{name} hlo_stats"),
                "row count",
                ours.len() == theirs.len(),
                format!("ours {} vs XProf {}", ours.len(), theirs.len()),
            );
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                tally.fields(&format!("{name} hlo_stats row {i}"), a, b);
            }
        }
    }
    if let Some(o) = oracle_opt(oracle_dir, "roofline_model") {
        let (dev, recs) = xprof_opstats::views::roofline_model(s);
        if let Some(p) = o[0]["p"].as_object() {
            if s.run_env.hardware_type == xprof_opstats::opstats::HardwareType::CpuOnly {
                // No device: XProf prints zeros and blanks, our tool answers no_data.
                let blank = |v: &Value| zero_like(v) || v == "";
                tally.structure(
                    &format!("{name} roofline device"),
                    "blank",
                    p.values().all(blank),
                    format!("{p:?}"),
                );
            } else {
                tally.fields(&format!("{name} roofline device"), &dev, p);
            }
        }
        let theirs = table_rows(&o[0]);
        if !(host_executed && theirs.iter().all(|t| t["operation"] == "Program")) {
            let key = |m: &Map<String, Value>| {
                (
                    m["step"].clone(),
                    m["operation"].clone(),
                    m["include_infeed_outfeed"].clone(),
                    // One op name can be in several programs.
                    m["hlo_module_id"].clone(),
                )
            };
            for t in &theirs {
                let ctx = format!("{name} roofline {:?}", key(t));
                // Without a per-step op database (GPU) XProf prints each step's Program row
                // (and, for several hosts, the Average row) with zeros and bound "Unknown";
                // we leave those rows out.
                let empty_step_row = t["step"] != "Total"
                    && t["bound_by"] == "Unknown"
                    && zero_like(&t["total_time"])
                    && zero_like(&t["measured_flop_rate"]);
                match recs.iter().find(|r| key(r) == key(t)) {
                    Some(r) => tally.fields(&ctx, r, t),
                    None => tally.structure(&ctx, "row", empty_step_row, "missing".into()),
                }
            }
        }
    }
    if let Some(o) = oracle_opt(oracle_dir, "overview_page") {
        let ov = xprof_opstats::views::overview(s);
        let ps = ov["performance_summary"].as_object().unwrap();
        let env = ov["run_environment"].as_object().unwrap();
        // The analysis fields we carry (the rest are XProf's page texts and colours).
        // Its first table's properties and its input analysis' (the step breakdown).
        let theirs: Map<String, Value> = [&o[0]["p"], &o[1]["p"]]
            .into_iter()
            .filter_map(Value::as_object)
            .flatten()
            .filter(|(k, _)| ps.contains_key(*k) || ps.contains_key(&format!("{k}_reason")))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        tally.fields(&format!("{name} overview"), ps, &theirs);
        if let Some(p) = o[2]["p"].as_object() {
            tally.fields(&format!("{name} run environment"), env, p);
        }
    }
    for (view, group_by) in [
        ("op_profile", "program"),
        ("op_profile.group_by_category", "category"),
    ] {
        let Some(o) = oracle_opt(oracle_dir, view) else {
            continue;
        };
        let key = if group_by == "program" {
            "byProgram"
        } else {
            "byCategory"
        };
        for (k, with_idle) in [
            (key.to_string(), true),
            (format!("{key}ExcludeIdle"), false),
        ] {
            let Some(theirs) = o.get(&k).filter(|t| !t.is_null()) else {
                continue;
            };
            if host_executed && theirs["children"].as_array().is_none_or(|c| c.is_empty()) {
                continue;
            }
            let ours = xprof_opstats::views::op_profile(s, group_by, with_idle);
            compare_op_tree(&format!("{name} {k}"), &ours, theirs, tally);
        }
    }
}

/// One op-profile node and its children (in order) against XProf's.
pub fn compare_op_tree(ctx: &str, ours: &Value, theirs: &Value, tally: &mut Tally) {
    let ctx = format!("{ctx}/{}", theirs["name"].as_str().unwrap_or("?"));
    let named = ours["name"] == theirs["name"];
    tally.structure(&ctx, "name", named, format!("ours named {}", ours["name"]));
    if !named {
        return;
    }
    if let (Some(a), Some(b)) = (ours["metrics"].as_object(), theirs["metrics"].as_object()) {
        tally.fields(&ctx, a, b);
    }
    // The XLA facts of an op node, those we print.
    if let (Some(a), Some(b)) = (ours["xla"].as_object(), theirs["xla"].as_object()) {
        let shared: Map<String, Value> = b
            .iter()
            .filter(|(k, _)| a.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        tally.fields(&format!("{ctx} xla"), a, &shared);
    }
    let none: &[Value] = &[];
    let a = ours["children"].as_array().map_or(none, Vec::as_slice);
    let b = theirs["children"].as_array().map_or(none, Vec::as_slice);
    tally.structure(
        &ctx,
        "children",
        a.len() == b.len(),
        format!("{} children vs XProf {}", a.len(), b.len()),
    );
    for (x, y) in a.iter().zip(b) {
        compare_op_tree(&ctx, x, y, tally);
    }
}
