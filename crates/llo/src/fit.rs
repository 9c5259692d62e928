//! `get_llo_fit_summary`: one digest over the other LLO analyses (VMEM fit, MXU mnemonics,
//! unit occupancy, spills, the per-bundle timeline, schedule totals) plus INFERRED levers.
//!
//! Everything counted here comes from the same functions the standalone tools use, so the
//! numbers agree by construction. Everything is static (compile-time slots and sizes).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use crate::bundles::{self, Listing};
use crate::dump::{DumpIndex, Instance, PassFile, ProgramKind, classify, find_pass};
use crate::matrix::{self, Matrix};
use crate::mxu::{MxuScan, scan_mxu_mnemonics};
use crate::vmem::{self, HARDWARE_BYTES, SCOPED_DEFAULT_BYTES};
use crate::{LloError, Result, hex, read_text, round_to, schedule};

/// Most digest lines the summary prints.
pub const MAX_DIGEST_LINES: usize = 30;

pub const STALL_CLASSES: &[&str] = &[
    "mem_stall_mxu_idle",
    "vpu_only_mxu_idle",
    "salu_bubble",
    "idle",
];
pub const CLASSES: &[&str] = &[
    "overlap_mxu_mem",
    "mxu_only",
    "mem_stall_mxu_idle",
    "vpu_only_mxu_idle",
    "salu_bubble",
    "idle",
];

const TRACK_RECORD_JSON: &str = include_str!("../data/lever_track_record.json");

/// The lever track record: `$XPROF_LEVER_TRACK_RECORD` (a JSON file the project updates as
/// outcomes are measured) when set and readable, else the copy compiled in from
/// `crates/llo/data/lever_track_record.json`. Returns the data and where it came from.
static TRACK: LazyLock<(Value, String)> = LazyLock::new(|| {
    load_track_record(std::env::var_os("XPROF_LEVER_TRACK_RECORD").map(PathBuf::from))
});

/// Load the track record from `path` (falling back to the compiled-in copy, saying why).
pub fn load_track_record(path: Option<PathBuf>) -> (Value, String) {
    let bundled = || -> Value {
        serde_json::from_str(TRACK_RECORD_JSON).expect("the bundled track record is valid JSON")
    };
    const BUNDLED: &str = "crates/llo/data/lever_track_record.json (compiled in)";
    let Some(path) = path else {
        return (bundled(), BUNDLED.to_string());
    };
    let read = xprof_xspace::file::read_text(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()));
    match read {
        Ok(v) if v["levers"].is_object() => (v, path.display().to_string()),
        Ok(_) => (
            bundled(),
            format!("{BUNDLED}; {} has no `levers` object", path.display()),
        ),
        Err(e) => (
            bundled(),
            format!("{BUNDLED}; {} unreadable: {e}", path.display()),
        ),
    }
}

/// The track record of one lever, with where it came from.
pub fn track_record(lever: &str) -> Option<Value> {
    let r = TRACK.0["levers"].get(lever)?;
    Some(json!({
        "confirmed": r["confirmed"],
        "attempted": r["attempted"],
        "note": r["note"],
        "source": TRACK.1,
    }))
}

fn min_attempts() -> u64 {
    TRACK.0["min_attempts_to_discredit"].as_u64().unwrap_or(3)
}

pub fn is_discredited(rec: &Value) -> bool {
    let tr = &rec["track_record"];
    tr["confirmed"].as_u64() == Some(0)
        && tr["attempted"]
            .as_u64()
            .is_some_and(|a| a >= min_attempts())
}

/// Python's `repr(float)` for the digest: `4.0`, `28.3`, `0.26`.
pub fn py_float(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

fn py_num(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => py_float(n.as_f64().unwrap_or(0.0)),
        Value::Null => "None".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn mib(bytes: u64) -> f64 {
    round_to(bytes as f64 / (1024.0 * 1024.0), 2)
}

fn pct_of(val: f64, reference: f64) -> f64 {
    if reference == 0.0 {
        0.0
    } else {
        round_to(100.0 * val / reference, 1)
    }
}

/// The VMEM section (empty object when no allocation-bearing pass exists).
pub fn vmem_fit(idx: &DumpIndex, inst: &Instance) -> Result<(Value, Option<String>)> {
    let Some(p) = vmem::find_alloc_pass(idx, inst)? else {
        return Ok((json!({}), None));
    };
    let a = vmem::extract_file(&idx.path_of(p))?;
    let total = a.total();
    let used = pct_of(total as f64, SCOPED_DEFAULT_BYTES as f64);
    let used_hw = pct_of(total as f64, HARDWARE_BYTES as f64);
    Ok((
        json!({
            "allocations": a.allocations,
            "vmem_total_bytes": total,
            "vmem_scoped_bytes": a.scoped(),
            "vmem_unresolved_count": a.unresolved,
            "from_pass": if p.label.is_empty() { "(unlabeled)" } else { p.label.as_str() },
            "limit_scoped_default_bytes": SCOPED_DEFAULT_BYTES,
            "limit_hardware_bytes": HARDWARE_BYTES,
            "used_of_scoped_default_pct": used,
            "headroom_vs_scoped_default_pct": round_to(100.0 - used, 1),
            "used_of_hardware_pct": used_hw,
            "headroom_vs_hardware_pct": round_to(100.0 - used_hw, 1),
            "limit_note": "operative limit = --xla_tpu_scoped_vmem_limit_kib (not recorded in the dump); 32 MiB scoped default unless overridden, 128 MiB hardware VMEM",
        }),
        Some(p.file.clone()),
    ))
}

/// Spill / fill traffic from the matrix. A missing column is `null` with a reason, never 0.
pub fn spill_metrics(m: &Matrix) -> Value {
    let n = m.well_formed_rows().count();
    let sum = |unit: &str| {
        m.col(unit)
            .map(|i| m.well_formed_rows().map(|r| r[i] as u64).sum::<u64>())
    };
    let (s, f) = (sum("VSTORE:SPILL"), sum("VLOAD:FILL"));
    let mut o = Map::new();
    o.insert("spills_total".into(), json!(s));
    o.insert("fills_total".into(), json!(f));
    o.insert("bundles".into(), json!(n));
    let rate = match (s, f) {
        (Some(s), Some(f)) => Some(if n > 0 {
            round_to((s + f) as f64 / n as f64, 2)
        } else {
            0.0
        }),
        _ => None,
    };
    o.insert("spill_fill_per_bundle".into(), json!(rate));
    if s.is_none() || f.is_none() {
        o.insert(
            "spills_reason".into(),
            json!("the utilization matrix has no VSTORE:SPILL / VLOAD:FILL column (different libtpu unit names); spill traffic is unknown, not zero"),
        );
    }
    if rate.is_some_and(|r| r > 0.5) {
        o.insert(
            "flag".into(),
            json!("REGISTER-PRESSURE: spill/fill traffic above 0.5 per bundle inflates vector-slot occupancy — fewer live vectors (less unroll, split the accumulator chain) would remove it"),
        );
    }
    Value::Object(o)
}

/// The class of each matrix row (malformed rows are `idle`).
pub fn classify_rows(m: &Matrix) -> Vec<&'static str> {
    let slot = |r: &[u32], u: &str| m.col(u).map(|i| r[i]).unwrap_or(0);
    m.rows
        .iter()
        .map(|r| {
            if !m.is_well_formed(r) {
                return "idle";
            }
            let mxu = slot(r, "MXU") > 0;
            let mem = slot(r, "VLOAD")
                + slot(r, "VSTORE")
                + slot(r, "VLOAD:FILL")
                + slot(r, "VSTORE:SPILL")
                > 0;
            let vpu = slot(r, "VALU") + slot(r, "VPOP") + slot(r, "EUP") + slot(r, "XLU") > 0;
            if mxu && mem {
                "overlap_mxu_mem"
            } else if mxu {
                "mxu_only"
            } else if mem {
                "mem_stall_mxu_idle"
            } else if vpu {
                "vpu_only_mxu_idle"
            } else if slot(r, "SALU") > 0 {
                "salu_bubble"
            } else {
                "idle"
            }
        })
        .collect()
}

fn most_common<'a>(items: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut order: Vec<&str> = Vec::new();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for it in items {
        let c = counts.entry(it).or_default();
        if *c == 0 {
            order.push(it);
        }
        *c += 1;
    }
    let mut best: Option<&str> = None;
    for it in order {
        if best.is_none_or(|b| counts[it] > counts[b]) {
            best = Some(it);
        }
    }
    best
}

/// The timeline section: class shares and the longest runs of MXU-idle classes.
pub fn timeline(m: &Matrix, hlo_by_addr: &HashMap<u64, &str>, top_stalls: usize) -> Value {
    let classes = classify_rows(m);
    let n = classes.len().max(1) as f64;
    let mut pct = Map::new();
    for c in CLASSES {
        pct.insert(
            c.to_string(),
            json!(pct_of(classes.iter().filter(|x| *x == c).count() as f64, n)),
        );
    }
    let stall: f64 = STALL_CLASSES
        .iter()
        .map(|c| pct[*c].as_f64().unwrap_or(0.0))
        .sum();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in classes
        .iter()
        .chain(std::iter::once(&"mxu_only"))
        .enumerate()
    {
        let stalled = STALL_CLASSES.contains(c);
        match (stalled, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    runs.sort_by_key(|(s, e)| std::cmp::Reverse(e - s));
    let top: Vec<Value> = runs
        .iter()
        .take(top_stalls)
        .map(|&(s, e)| {
            let dom = most_common(classes[s..e].iter().copied()).unwrap_or("idle");
            let hlo =
                most_common((s..e).map(|b| hlo_by_addr.get(&(b as u64)).copied().unwrap_or("?")))
                    .unwrap_or("?");
            json!({
                "bundle_range": [hex(s as u64), hex((e - 1) as u64)],
                "length": e - s,
                "dominant_class": dom,
                "hlo": hlo,
            })
        })
        .collect();
    json!({
        "bundle_class_pct": pct,
        "mxu_idle_stall_pct": round_to(stall, 1),
        "top_stall_runs": top,
        "semantics": "static issue-slot co-residency per bundle; async DMA engines are not visible — 'mem' means VLOAD/VSTORE slots",
        "weighting": "bundle-count-weighted, not time: a loop body executes many times, so shares of bundles are not shares of run time",
    })
}

fn ceiling(p: f64) -> String {
    if p >= 99.0 {
        "unbounded".into()
    } else {
        format!("<={:.2}x", 1.0 / (1.0 - p / 100.0))
    }
}

fn ceiling_value(s: &str) -> f64 {
    // The number before the first `x` (`<=1.14x`); levers without one rank as 0.
    let Some(xpos) = s.find('x') else { return 0.0 };
    let head = &s[..xpos];
    let start = head
        .rfind(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|i| i + 1)
        .unwrap_or(0);
    head[start..].parse().unwrap_or(0.0)
}

/// Ranked INFERRED levers from the measured sections (pure: rows 34/35 test it directly).
/// Discredited levers (0 confirmations in enough attempts) sort last; the rest by ceiling.
pub fn recommendations(vmem: &Value, mxu: &Value, spill: &Value, tl: &Value) -> Vec<Value> {
    let mut recs: Vec<Value> = Vec::new();
    let pct = |k: &str| tl["bundle_class_pct"][k].as_f64().unwrap_or(0.0);
    let headroom = vmem["headroom_vs_scoped_default_pct"].as_f64();
    let matmuls = mxu["matmul_count"].as_u64().unwrap_or(0);

    if spill["spill_fill_per_bundle"]
        .as_f64()
        .is_some_and(|r| r > 0.5)
    {
        let mut r = json!({
            "kind": "STRUCTURAL",
            "lever": "restructure the live-register set: less unroll / split the accumulator chain (spill traffic is not a tunable)",
            "ceiling_estimate": "unquantified — no ceiling can be derived from a spill count",
            "basis": format!(
                "{} spills + {} fills (absolute) over {} bundles; rate {}/bundle",
                py_num(&spill["spills_total"]), py_num(&spill["fills_total"]),
                py_num(&spill["bundles"]), py_num(&spill["spill_fill_per_bundle"])
            ),
            "denominator_warning": "spill_fill_per_bundle divides by `bundles`, which shrinks when work is removed: it can rise on a candidate that got faster. Quote the absolute counts, and grade on neither.",
            "confidence": "low",
            "alternative": "Before attacking register liveness, sort full-width arrays by role: an operand-sized value on the memory->MXU path (a matmul operand built by a vector op instead of read from a VMEM ref) is reliably expensive, while a result-sized value in the elementwise chain after a matmul is often free.",
        });
        if let Some(tr) = track_record("live-register") {
            r["track_record"] = tr;
        }
        recs.push(r);
    }
    let mem = pct("mem_stall_mxu_idle");
    if mem >= 5.0 {
        let mut lever =
            "overlap memory traffic with MXU: deepen multi-buffering / prefetch".to_string();
        if let Some(h) = headroom.filter(|h| *h >= 25.0) {
            lever += &format!(
                " (VMEM headroom {}% of scoped default allows deeper buffering)",
                py_float(h)
            );
        }
        recs.push(
            json!({"kind": "TUNE", "lever": lever, "ceiling_estimate": ceiling(mem),
            "basis": format!("eliminate {}% MXU-idle memory-stall bundles", py_float(mem))}),
        );
    }
    let salu = pct("salu_bubble");
    if salu >= 5.0 {
        recs.push(json!({"kind": "TUNE",
            "lever": "hoist scalar address computation / batch DMA descriptors out of the inner loop",
            "ceiling_estimate": ceiling(salu),
            "basis": format!("eliminate {}% scalar-only bubbles", py_float(salu))}));
    }
    let vpu = pct("vpu_only_mxu_idle");
    if vpu >= 5.0 && matmuls > 0 {
        recs.push(json!({"kind": "TUNE",
            "lever": "schedule vector-only prologue/epilogue work under the matmul pipeline",
            "ceiling_estimate": ceiling(vpu),
            "basis": format!("{}% bundles are VPU-only with MXU idle", py_float(vpu))}));
    }
    let idle = pct("idle");
    if idle >= 5.0 {
        recs.push(json!({"kind": "TUNE",
            "lever": "scheduler bubbles: restructure dependency chains / adjust unroll",
            "ceiling_estimate": ceiling(idle),
            "basis": format!("{}% fully-idle bundles", py_float(idle))}));
    }
    let unmodeled = mxu["unmodeled_mnemonics"]
        .as_object()
        .is_some_and(|o| !o.is_empty());
    if matmuls > 0 && mxu["inferred_operand_lanes"].as_u64() == Some(128) && !unmodeled {
        let mut r = json!({"kind": "STRUCTURAL",
            "lever": "feed full 256-lane MXU tiles (operand staging is half-width)",
            "ceiling_estimate": "<=2.0x",
            "basis": "only matpush1 observed — 128-lane staging",
            "confidence": "low"});
        if let Some(tr) = track_record("mxu-half-width") {
            r["track_record"] = tr;
        }
        recs.push(r);
    }
    // Stable sort: discredited last, then by descending numeric ceiling.
    // L10: numeric ceilings count bundles; loop bodies run many times, so say what they are.
    for r in &mut recs {
        if ceiling_value(r["ceiling_estimate"].as_str().unwrap_or("")) > 0.0 {
            r["ceiling_semantics"] = json!("bundle-count-weighted, not time");
        }
    }
    recs.sort_by(|a, b| {
        let key = |r: &Value| {
            let ce = r["ceiling_estimate"].as_str().unwrap_or("");
            (is_discredited(r), -ceiling_value(ce))
        };
        let (da, ca) = key(a);
        let (db, cb) = key(b);
        da.cmp(&db)
            .then(ca.partial_cmp(&cb).unwrap_or(std::cmp::Ordering::Equal))
    });
    recs
}

fn verdict(units: &Map<String, Value>, vmem: &Value) -> String {
    let mut best: Option<(&str, f64)> = None;
    for (u, v) in units {
        if u.contains(':') {
            continue;
        }
        let Some(o) = v["occupancy_pct"].as_f64() else {
            continue;
        };
        if best.is_none_or(|(_, b)| o > b) {
            best = Some((u, o));
        }
    }
    let mut out = match best {
        None => "no signal (no utilization matrix in dump)".to_string(),
        Some((u, o)) => {
            let label = match u {
                "MXU" => "compute-bound (MXU)".to_string(),
                "VLOAD" => "DMA/memory-bound (vector loads dominate)".into(),
                "VSTORE" => "DMA/memory-bound (vector stores dominate)".into(),
                "SALU" => "scalar-serialized (SALU dominates)".into(),
                "VALU" => "VPU-serialized (vector ALU dominates, MXU starved)".into(),
                "VPOP" => "VPU-serialized (vector pop dominates)".into(),
                "EUP" => "VPU-serialized (transcendentals dominate)".into(),
                "XLU" => "XLU-serialized (transposes/permutes dominate)".into(),
                other => format!("{other}-dominated"),
            };
            format!("{label} — {u} {}% static occupancy", py_float(o))
        }
    };
    if let Some(u) = vmem["used_of_scoped_default_pct"]
        .as_f64()
        .filter(|u| *u >= 90.0)
    {
        out = format!(
            "VMEM-capped ({}% of the 32 MiB scoped default) — then {out}",
            py_float(u)
        );
    }
    out
}

/// The bundle listing pass: exactly `final_bundles` (a regex would also hit
/// `schedule-analysis_final_bundles`, which is not a listing).
pub fn bundle_pass(inst: &Instance) -> Option<&PassFile> {
    inst.passes.get("final_bundles")
}

/// Load and parse the bundle listing of an instance, if present.
pub fn load_listing(idx: &DumpIndex, inst: &Instance) -> Result<Option<(String, Listing, String)>> {
    let Some(p) = bundle_pass(inst) else {
        return Ok(None);
    };
    let path = idx.path_of(p);
    let text = read_text(&path)?;
    let listing = bundles::parse(&text, &path)?;
    Ok(Some((p.file.clone(), listing, text)))
}

/// Load and parse the per-bundle utilization matrix, if present.
pub fn load_matrix(idx: &DumpIndex, inst: &Instance) -> Result<Option<(String, String, Matrix)>> {
    let p = match find_pass(inst, "per-bundle-utilization") {
        Ok(c) => c.pass,
        Err(LloError::PassNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let path = idx.path_of(p);
    let m = matrix::parse(&read_text(&path)?, &path)?;
    Ok(Some((p.label.clone(), p.file.clone(), m)))
}

/// The default program: kernels (by name) else fusions else all; within that pool, programs
/// with custom-call evidence in their dump (L8) are preferred; then the one whose primary
/// instance has the most passes, ties to the first name. Returns why it was chosen.
pub fn default_program(idx: &DumpIndex) -> Option<(&str, String)> {
    let (kind, pool): (&str, Vec<&str>) = [ProgramKind::Kernel, ProgramKind::Fusion]
        .iter()
        .map(|k| {
            (
                k.as_str(),
                idx.programs
                    .keys()
                    .filter(|n| classify(n) == *k)
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            )
        })
        .find(|(_, v)| !v.is_empty())
        .unwrap_or_else(|| ("any", idx.programs.keys().map(String::as_str).collect()));
    let evidenced: Vec<&str> = pool
        .iter()
        .copied()
        .filter(|n| {
            crate::dump::custom_call_evidence(idx, idx.programs[*n].primary()).0 == Some(true)
        })
        .collect();
    let (pool, why_pool) = if evidenced.is_empty() {
        (pool, format!("{kind}-named programs"))
    } else {
        (
            evidenced,
            format!("{kind}-named programs with custom-call evidence"),
        )
    };
    let mut best: Option<(&str, usize)> = None;
    for n in &pool {
        let c = idx.programs[*n].primary().passes.len();
        if best.is_none_or(|(_, b)| c > b) {
            best = Some((n, c));
        }
    }
    best.map(|(n, c)| {
        (
            n,
            format!(
                "default: among {} {why_pool}, the one with the most passes ({c})",
                pool.len()
            ),
        )
    })
}

/// The full fit-summary payload for one dump directory.
pub fn fit_data(
    idx: &DumpIndex,
    program: Option<&str>,
    top_stalls: usize,
) -> Result<Map<String, Value>> {
    let (program, selected_because) = match program.filter(|p| !p.is_empty()) {
        Some(p) => (p.to_string(), "named by --program".to_string()),
        None => {
            let (p, why) = default_program(idx).ok_or_else(|| {
                LloError::no_data(
                    crate::no_dir_message(&idx.dir.display().to_string()),
                    crate::LLO_CAPTURE_FLAGS,
                )
            })?;
            (p.to_string(), why)
        }
    };
    let prog = idx.program(&program)?;
    let inst = prog.primary();
    let mut files: Vec<String> = Vec::new();

    let (vmem, vmem_file) = vmem_fit(idx, inst)?;
    files.extend(vmem_file);

    let listing = load_listing(idx, inst)?;
    let (mxu, hlo_by_addr, bundle_count): (Value, HashMap<u64, &str>, Option<usize>) =
        match &listing {
            Some((file, l, text)) => {
                files.push(file.clone());
                let scan: MxuScan = scan_mxu_mnemonics(text);
                let carried = l.hlo_carried();
                let map = l
                    .bundles
                    .iter()
                    .zip(carried)
                    .filter_map(|(b, h)| h.map(|h| (b.address, h)))
                    .collect();
                (scan.to_json(), map, Some(l.bundles.len()))
            }
            None => (json!({}), HashMap::new(), None),
        };

    let mut units = Map::new();
    let (mut spills, mut tl) = (json!({}), json!({}));
    let mut matrix_rows = None;
    let mut units_coverage = Value::Null;
    if let Some((_, file, m)) = load_matrix(idx, inst)? {
        files.push(file);
        for (u, s) in matrix::unit_stats(&m) {
            units.insert(
                u,
                json!({"capacity": s.capacity.max(1), "occupancy_pct": s.occupancy_pct, "nonzero_bundle_pct": s.nonzero_bundle_pct}),
            );
        }
        spills = spill_metrics(&m);
        // L5: the timeline classes need the MXU and vector load/store columns; a matrix from a
        // libtpu with other unit names gets no timeline (and so no stall levers), not zeros.
        let missing: Vec<&str> = ["MXU", "VLOAD", "VSTORE"]
            .into_iter()
            .filter(|u| m.col(u).is_none())
            .collect();
        tl = if missing.is_empty() {
            timeline(&m, &hlo_by_addr, top_stalls)
        } else {
            json!({})
        };
        units_coverage = json!({
            "missing_known_units": crate::matrix::KNOWN_UNITS.iter().filter(|u| m.col(u).is_none()).collect::<Vec<_>>(),
            "unmodeled_units": m.unmodeled_units(),
            "timeline_reason": if missing.is_empty() { Value::Null } else {
                json!(format!("no {} column in the utilization matrix: bundle classes cannot be derived", missing.join(", ")))
            },
        });
        matrix_rows = Some(m.rows.len());
    }

    let totals = match find_pass(inst, "schedule-analysis_final_bundles") {
        Ok(c) => {
            files.push(c.pass.file.clone());
            serde_json::to_value(schedule::parse(&read_text(&idx.path_of(c.pass))?).totals)
                .unwrap_or(json!({}))
        }
        Err(_) => json!({}),
    };

    let recs = recommendations(&vmem, &mxu, &spills, &tl);
    let verdict_s = verdict(&units, &vmem);
    let verdict_class = if let Some(r0) = recs.first() {
        let mut vc = json!({"class": r0["kind"], "top_lever": r0["lever"], "ceiling_estimate": r0["ceiling_estimate"]});
        if is_discredited(r0) {
            let tr = &r0["track_record"];
            vc["track_record"] = tr.clone();
            vc["warning"] = json!(format!(
                "top_lever has a measured record of {}/{} across the families that acted on it: every lever derivable from this dump is discredited — treat this as 'no trustworthy lever from static LLO', not as guidance",
                tr["confirmed"], tr["attempted"]
            ));
        }
        vc
    } else if tl.as_object().is_none_or(|o| o.is_empty()) {
        json!({"class": "UNKNOWN", "top_lever": null, "ceiling_estimate": null,
               "reason": if units.is_empty() { "no utilization matrix in dump — the per-bundle utilization pass is missing, so no lever could be derived; this is absence of evidence, NOT evidence the kernel is at its ceiling" } else { "the utilization matrix lacks the unit columns the bundle timeline needs (see units_coverage), so no lever could be derived; this is absence of evidence, NOT evidence the kernel is at its ceiling" }})
    } else {
        json!({"class": "AT-CEILING", "top_lever": null, "ceiling_estimate": "~1.0x (no stall lever above threshold)"})
    };

    let mut d = Map::new();
    d.insert("dump_dir".into(), json!(idx.dir.display().to_string()));
    d.insert("program".into(), json!(program));
    d.insert("kind".into(), json!(classify(&program).as_str()));
    d.insert(
        "other_programs".into(),
        json!(
            idx.programs
                .keys()
                .filter(|n| **n != program && classify(n) != ProgramKind::Infrastructure)
                .collect::<Vec<_>>()
        ),
    );
    d.insert("vmem".into(), vmem);
    d.insert("mxu".into(), mxu);
    d.insert("units".into(), Value::Object(units));
    d.insert("spills".into(), spills);
    d.insert("timeline".into(), tl);
    d.insert("totals".into(), totals);
    d.insert("recommendations".into(), Value::Array(recs));
    d.insert("verdict".into(), json!(verdict_s));
    d.insert("verdict_class".into(), verdict_class);
    d.insert(
        "provenance".into(),
        json!({
            "measurements": {"description": "counted from the dump; cite these",
                             "keys": ["vmem", "mxu", "spills", "units", "timeline", "totals"]},
            "hypotheses": {"description": "INFERRED heuristics, not measurements. Leads to test, never evidence for a verdict. Check `track_record` before spending a candidate.",
                           "keys": ["recommendations", "verdict", "verdict_class"]},
            "derived": {"description": "arithmetic on counted values", "keys": ["vmem.used_of_scoped_default_pct", "spills.spill_fill_per_bundle", "timeline.bundle_class_pct", "units.occupancy_pct"]},
            "grading_metrics_forbidden": {
                "spill_fill_per_bundle": "ratio whose denominator shrinks with the edit being graded; can rise on a candidate that got faster",
                "occupancy_pct": "static issue-slot co-residency, not time; a unit at 60% static occupancy may be entirely in the shadow of memory waits and cost nothing to remove",
            },
        }),
    );
    d.insert(
        "caveat".into(),
        json!("static compile-time analysis (issue slots + allocation sizes), not measured time; verify with get_llo_utilization on a kernel-profiling trace. `recommendations` are INFERRED leads, not measurements — check each lever's track_record before acting"),
    );
    d.insert(
        "alignment".into(),
        json!({
            "matrix_rows": matrix_rows,
            "bundles": bundle_count,
            "aligned": match (matrix_rows, bundle_count) { (Some(a), Some(b)) => Some(a == b), _ => None },
            "meaning": "row i of the utilization matrix is bundle address i only when the counts agree",
        }),
    );
    d.insert("units_coverage".into(), units_coverage);
    d.insert("files".into(), json!(files));
    d.insert("selected_because".into(), json!(selected_because));
    Ok(d)
}

fn diff_scalars(d: &Map<String, Value>) -> Vec<(&'static str, Value)> {
    let g = |sec: &str, k: &str| {
        d.get(sec)
            .and_then(|s| s.get(k))
            .cloned()
            .unwrap_or(json!(0))
    };
    vec![
        (
            "vmem_total_mib",
            json!(mib(d
                .get("vmem")
                .and_then(|v| v["vmem_total_bytes"].as_u64())
                .unwrap_or(0))),
        ),
        ("spills", g("spills", "spills_total")),
        ("fills", g("spills", "fills_total")),
        (
            "spill_fill_per_bundle",
            g("spills", "spill_fill_per_bundle"),
        ),
        (
            "mxu_occupancy_pct",
            d.get("units")
                .and_then(|u| u.get("MXU"))
                .map(|m| m["occupancy_pct"].clone())
                .unwrap_or(json!(0)),
        ),
        ("mxu_idle_stall_pct", g("timeline", "mxu_idle_stall_pct")),
        ("total_bundles", g("totals", "total_bundles")),
    ]
}

/// L11: the operative scoped-VMEM limit, when an XLA dump directory records it; else the
/// reason the two reference points are all there is.
pub fn add_operative_limit(data: &mut Map<String, Value>, hlo_dump_dir: Option<&Path>) {
    let Some(vmem) = data.get_mut("vmem").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(total) = vmem.get("vmem_total_bytes").and_then(Value::as_u64) else {
        return;
    };
    let found = match hlo_dump_dir {
        None => Err("no --hlo_dump_dir given: the operative --xla_tpu_scoped_vmem_limit_kib is not in the LLO dump; headroom is against the 32 MiB default and 128 MiB hardware only".to_string()),
        Some(d) => match vmem::scoped_limit_from_hlo_dump(d) {
            Ok(Some(x)) => Ok(x),
            Ok(None) => Err(format!("no *.flagfile or *tpu_comp_env* file in {} records --xla_tpu_scoped_vmem_limit_kib (the 32 MiB default applies unless it was set elsewhere)", d.display())),
            Err(e) => Err(e.to_string()),
        },
    };
    match found {
        Ok((bytes, file)) => {
            let used = pct_of(total as f64, bytes as f64);
            vmem.insert("limit_operative_bytes".into(), json!(bytes));
            vmem.insert("limit_operative_source".into(), json!(file));
            vmem.insert("used_of_operative_pct".into(), json!(used));
            vmem.insert(
                "headroom_vs_operative_pct".into(),
                json!(round_to(100.0 - used, 1)),
            );
        }
        Err(reason) => {
            vmem.insert("limit_operative_bytes".into(), Value::Null);
            vmem.insert("limit_operative_reason".into(), json!(reason));
        }
    }
}

/// Attach `diff` against another dump directory (`before` = other, `after` = this).
pub fn add_diff(data: &mut Map<String, Value>, other_dir: &Path, top_stalls: usize) {
    let program = data["program"].as_str().unwrap_or("").to_string();
    let other = DumpIndex::open(Some(other_dir.to_path_buf())).and_then(|idx| {
        let p = if idx.programs.contains_key(&program) {
            Some(program.as_str())
        } else {
            None
        };
        fit_data(&idx, p, top_stalls)
    });
    let diff = match other {
        Ok(o) => {
            let mut deltas = Map::new();
            for ((name, before), (_, after)) in diff_scalars(&o).into_iter().zip(diff_scalars(data))
            {
                let changed = before != after;
                deltas.insert(
                    name.into(),
                    json!({"before": before, "after": after, "changed": changed}),
                );
            }
            json!({
                "other_dump_dir": other_dir.display().to_string(),
                "other_program": o["program"],
                "direction": "before=diff_dump_dir, after=dump_dir",
                "deltas": deltas,
            })
        }
        Err(e) => {
            json!({"other_dump_dir": other_dir.display().to_string(), "error": e.to_string()})
        }
    };
    data.insert("diff".into(), diff);
}

/// The ≤ 30-line markdown digest.
pub fn digest(d: &Map<String, Value>, top_stalls: usize) -> Vec<String> {
    let null = Value::Null;
    let get = |k: &str| d.get(k).unwrap_or(&null);
    let mut lines = vec![format!(
        "# LLO fit summary — {} ({})",
        get("program").as_str().unwrap_or(""),
        get("kind").as_str().unwrap_or("")
    )];
    let vmem = get("vmem");
    if let Some(total) = vmem["vmem_total_bytes"].as_u64() {
        let allocs = vmem["allocations"].as_array().cloned().unwrap_or_default();
        lines.push(format!(
            "VMEM: {} MiB allocated ({} allocs, pass {}) = {}% of 32 MiB scoped default ({}% headroom), {}% of 128 MiB HW ({}% headroom)",
            py_float(mib(total)),
            allocs.len(),
            py_num(&vmem["from_pass"]),
            py_num(&vmem["used_of_scoped_default_pct"]),
            py_num(&vmem["headroom_vs_scoped_default_pct"]),
            py_num(&vmem["used_of_hardware_pct"]),
            py_num(&vmem["headroom_vs_hardware_pct"]),
        ));
        let top: Vec<String> = allocs
            .iter()
            .take(3)
            .map(|a| {
                let tag = a["tag"]
                    .as_str()
                    .filter(|t| !t.is_empty())
                    .or(a["shape"].as_str())
                    .unwrap_or("");
                format!(
                    "{} MiB {tag}",
                    py_float(mib(a["size_bytes"].as_u64().unwrap_or(0)))
                )
            })
            .collect();
        lines.push(format!("  top allocs: {}", top.join(", ")));
    } else {
        lines.push("VMEM: n/a (no allocation-bearing IR pass in dump — capture without pass-label filtering)".into());
    }
    let mxu = get("mxu");
    if mxu["matmul_count"].as_u64().is_some_and(|c| c > 0) {
        let units: Vec<&str> = mxu["mxus_used"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let dtypes: Vec<&str> = mxu["dtypes"]
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        lines.push(format!(
            "MXU: {} matmuls on {}, dtypes {}, operand width ~{} lanes ({})",
            mxu["matmul_count"],
            if units.is_empty() {
                "mxu?".to_string()
            } else {
                units.join("+")
            },
            if dtypes.is_empty() {
                "n/a".to_string()
            } else {
                dtypes.join("/")
            },
            py_num(&mxu["inferred_operand_lanes"]),
            py_num(&mxu["lane_inference"]),
        ));
    } else {
        lines.push("MXU: no matmul mnemonics in final bundles".into());
    }
    if let Some(units) = get("units").as_object().filter(|u| !u.is_empty()) {
        let parts: Vec<String> = ["MXU", "VALU", "EUP", "VLOAD", "VSTORE", "SALU"]
            .iter()
            .filter_map(|u| {
                units
                    .get(*u)
                    .map(|v| format!("{u}={}%", py_num(&v["occupancy_pct"])))
            })
            .collect();
        lines.push(format!(
            "Unit split (static occupancy): {}",
            parts.join("  ")
        ));
    }
    let sp = get("spills");
    if sp.as_object().is_some_and(|o| !o.is_empty()) {
        lines.push(format!(
            "Spills: {} spills + {} fills over {} bundles ({}/bundle)",
            py_num(&sp["spills_total"]),
            py_num(&sp["fills_total"]),
            py_num(&sp["bundles"]),
            py_num(&sp["spill_fill_per_bundle"]),
        ));
        if let Some(f) = sp["flag"].as_str() {
            lines.push(format!("  {f}"));
        }
    }
    let tl = get("timeline");
    if tl.as_object().is_some_and(|o| !o.is_empty()) {
        let p = &tl["bundle_class_pct"];
        lines.push(format!(
            "Timeline: overlap(MXU+mem)={}%  MXU-only={}%  mem-stall(MXU idle)={}%  VPU-only={}%  SALU-bubble={}%  idle={}%",
            py_num(&p["overlap_mxu_mem"]),
            py_num(&p["mxu_only"]),
            py_num(&p["mem_stall_mxu_idle"]),
            py_num(&p["vpu_only_mxu_idle"]),
            py_num(&p["salu_bubble"]),
            py_num(&p["idle"]),
        ));
        if let Some(runs) = tl["top_stall_runs"].as_array().filter(|r| !r.is_empty()) {
            lines.push(format!("Top stall runs (max {top_stalls}):"));
            for r in runs {
                lines.push(format!(
                    "  - bundles {}-{} (len {}): {} — hlo: {}",
                    py_num(&r["bundle_range"][0]),
                    py_num(&r["bundle_range"][1]),
                    r["length"],
                    py_num(&r["dominant_class"]),
                    py_num(&r["hlo"]),
                ));
            }
        }
    }
    if let Some(recs) = get("recommendations").as_array().filter(|r| !r.is_empty()) {
        lines.push("Hypotheses (INFERRED leads, ranked — not measurements):".into());
        for (i, r) in recs.iter().take(4).enumerate() {
            let mut line = format!(
                "  {}. [{}] {} -> {} ({})",
                i + 1,
                py_num(&r["kind"]),
                py_num(&r["lever"]),
                py_num(&r["ceiling_estimate"]),
                py_num(&r["basis"])
            );
            if let Some(tr) = r.get("track_record") {
                line += &format!(
                    "  [TRACK RECORD {}/{} — {}]",
                    tr["confirmed"],
                    tr["attempted"],
                    py_num(&tr["note"])
                );
            }
            lines.push(line);
            if let Some(a) = r["alternative"].as_str() {
                lines.push(format!("     ALTERNATIVE: {a}"));
            }
        }
    }
    let vc = get("verdict_class");
    lines.push(format!(
        "Verdict: {} [class={} ceiling={}]",
        py_num(get("verdict")),
        py_num(&vc["class"]),
        py_num(&vc["ceiling_estimate"])
    ));
    lines.push(format!("Caveat: {}.", py_num(get("caveat"))));
    if let Some(o) = get("other_programs").as_array().filter(|o| !o.is_empty()) {
        let names: Vec<&str> = o.iter().filter_map(Value::as_str).collect();
        lines.push(format!(
            "Other programs in dump: {}{}",
            names.iter().take(4).copied().collect::<Vec<_>>().join(", "),
            if names.len() > 4 { " ..." } else { "" }
        ));
    }
    if let Some(diff) = d.get("diff") {
        if let Some(deltas) = diff["deltas"].as_object() {
            let changed: Vec<String> = deltas
                .iter()
                .filter(|(_, v)| v["changed"] == json!(true))
                .map(|(k, v)| format!("{k} {} -> {}", py_num(&v["before"]), py_num(&v["after"])))
                .collect();
            lines.push(format!(
                "Diff vs {} in {}: {}",
                py_num(&diff["other_program"]),
                py_num(&diff["other_dump_dir"]),
                if changed.is_empty() {
                    "no scalar changes".to_string()
                } else {
                    changed.join(", ")
                }
            ));
        } else {
            lines.push(format!(
                "Diff vs {}: {}",
                py_num(&diff["other_dump_dir"]),
                py_num(&diff["error"])
            ));
        }
    }
    lines.truncate(MAX_DIGEST_LINES);
    lines
}

/// The digest, a blank line and the fenced JSON (the seed's layout, which callers split on
/// "\n\n```json\n").
pub fn render(d: &Map<String, Value>, top_stalls: usize) -> String {
    let json = serde_json::to_string_pretty(&Value::Object(d.clone())).unwrap_or_default();
    format!(
        "{}\n\n```json\n{json}\n```",
        digest(d, top_stalls).join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row34_discredited_spill_lever_sorts_last() {
        let recs = recommendations(
            &json!({"headroom_vs_scoped_default_pct": 50.0}),
            &json!({}),
            &json!({"spill_fill_per_bundle": 3.0, "spills_total": 900, "fills_total": 900, "bundles": 600}),
            &json!({"bundle_class_pct": {"mem_stall_mxu_idle": 40.0}}),
        );
        assert!(!recs[0]["lever"].as_str().unwrap().contains("live-register"));
        assert_eq!(recs[0]["kind"], "TUNE");
        assert!(
            recs[0]["ceiling_estimate"]
                .as_str()
                .unwrap()
                .contains("1.67x")
        );
        assert!(
            recs.last().unwrap()["lever"]
                .as_str()
                .unwrap()
                .contains("live-register")
        );
    }

    #[test]
    fn row35_spill_lever_carries_its_record() {
        let recs = recommendations(
            &json!({"headroom_vs_scoped_default_pct": 50.0}),
            &json!({}),
            &json!({"spill_fill_per_bundle": 3.0, "spills_total": 900, "fills_total": 900, "bundles": 600}),
            &json!({}),
        );
        let r = recs
            .iter()
            .find(|r| r["lever"].as_str().unwrap().contains("live-register"))
            .unwrap();
        assert_eq!(r["track_record"]["confirmed"], 0);
        assert!(r["track_record"]["attempted"].as_u64().unwrap() >= 3);
        assert_eq!(r["confidence"], "low");
        assert!(r.get("denominator_warning").is_some());
        assert!(r["alternative"].as_str().unwrap().contains("operand"));
        assert!(
            r["basis"]
                .as_str()
                .unwrap()
                .starts_with("900 spills + 900 fills (absolute)")
        );
        assert!(
            r["ceiling_estimate"]
                .as_str()
                .unwrap()
                .contains("no ceiling can be derived")
        );
    }

    #[test]
    fn half_width_lever_needs_positive_evidence() {
        let tl = json!({});
        let with = recommendations(
            &json!({}),
            &json!({"matmul_count": 4, "inferred_operand_lanes": 128, "unmodeled_mnemonics": {}}),
            &json!({}),
            &tl,
        );
        assert_eq!(with.len(), 1);
        let without = recommendations(
            &json!({}),
            &json!({"matmul_count": 4, "inferred_operand_lanes": null, "unmodeled_mnemonics": {}}),
            &json!({}),
            &tl,
        );
        assert!(without.is_empty());
    }

    #[test]
    fn default_program_prefers_custom_call_evidence() {
        let t = tempfile::tempdir().unwrap();
        let w = |n: &str, body: &str| std::fs::write(t.path().join(n), body).unwrap();
        // `copy.3` has more passes but its schedule shows no custom call; `k.1` is the kernel.
        w("1000000000-copy.3-01-original.txt", "x");
        w("1000000000-copy.3-02-a.txt", "x");
        w(
            "1000000000-copy.3-03-schedule-analysis_final_bundles.txt",
            "\t[opcode]    9 scheduled bundles (100.00%): copy          (1 instances, 9.00 avg)\n",
        );
        w(
            "1000000000-k.1-01-schedule-analysis_final_bundles.txt",
            "\t[opcode]    9 scheduled bundles (100.00%): custom-call          (1 instances, 9.00 avg)\n",
        );
        let idx = DumpIndex::open(Some(t.path().to_path_buf())).unwrap();
        let (p, why) = default_program(&idx).unwrap();
        assert_eq!(p, "k.1");
        assert!(why.contains("custom-call evidence"), "{why}");
    }

    #[test]
    fn matrix_without_mxu_column_gets_no_timeline() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(
            t.path()
                .join("1000000000-k.1-05-final_hlo-static-per-bundle-utilization.txt"),
            "== CAPACITY:\nTENSOR, SALU\n2 2\n== UTILIZATION:\n1 0\n0 1\n",
        )
        .unwrap();
        let idx = DumpIndex::open(Some(t.path().to_path_buf())).unwrap();
        let d = fit_data(&idx, None, 5).unwrap();
        assert_eq!(d["timeline"], json!({}));
        assert!(
            d["units_coverage"]["timeline_reason"]
                .as_str()
                .unwrap()
                .contains("MXU")
        );
        assert_eq!(d["units_coverage"]["unmodeled_units"], json!(["TENSOR"]));
        assert!(
            d["spills"]["spills_total"].is_null(),
            "absent spill column is unknown, not 0"
        );
        assert_ne!(d["verdict_class"]["class"], "AT-CEILING");
    }

    #[test]
    fn track_record_file_override() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("tr.json");
        std::fs::write(&f, r#"{"min_attempts_to_discredit": 3, "levers": {"live-register": {"confirmed": 2, "attempted": 6, "note": "n"}}}"#).unwrap();
        let (v, src) = load_track_record(Some(f.clone()));
        assert_eq!(v["levers"]["live-register"]["confirmed"], 2);
        assert_eq!(src, f.display().to_string());
        let (v, src) = load_track_record(Some(t.path().join("missing.json")));
        assert_eq!(v["levers"]["live-register"]["confirmed"], 0);
        assert!(src.contains("unreadable"));
        assert!(load_track_record(None).1.contains("compiled in"));
    }

    #[test]
    fn python_float_repr() {
        assert_eq!(py_float(4.0), "4.0");
        assert_eq!(py_float(28.3), "28.3");
        assert_eq!(py_float(0.0), "0.0");
        assert_eq!(ceiling(12.5), "<=1.14x");
        assert_eq!(ceiling_value("<=1.14x"), 1.14);
        assert_eq!(ceiling_value("unquantified"), 0.0);
    }
}
