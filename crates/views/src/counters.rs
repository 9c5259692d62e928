//! Hardware counters: perf_counters (XProf `xplane_to_perf_counters.cc`) and utilization_viewer
//! (`xplane_to_utilization_viewer.cc`, `tpu_generic_utilization_utils.cc`).

use std::collections::HashMap;

use serde_json::{Map, json};
use xprof_xspace::{StatValue, XSpace};

use crate::counter_ids::*;
use crate::table::Table;

pub const PERF_COLUMNS: &[&str] = &[
    "Host",
    "Chip",
    "Kernel",
    "Sample",
    "Counter",
    "Value",
    "Description",
    "Set",
];

fn is_device_plane(name: &str) -> bool {
    name.starts_with("/device:TPU:") || name.starts_with("/device:GPU:")
}

/// Why a capture has no counter rows: which planes/stats are missing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CounterPresence {
    pub device_planes: usize,
    /// Device planes with `global_chip_id` or `device_id`.
    pub planes_with_chip_id: usize,
    /// Events with a `counter_value` stat on those planes.
    pub counter_events: usize,
}

/// perf_counters: one row per event with a `counter_value` stat on every TPU/GPU plane that
/// names its chip (`global_chip_id`, else `device_id`), over every host.
pub fn perf_counters(hosts: &[(String, XSpace)]) -> Table {
    perf_counters_with_presence(hosts).0
}

pub fn perf_counters_with_presence(hosts: &[(String, XSpace)]) -> (Table, CounterPresence) {
    let mut t = Table::new(PERF_COLUMNS);
    let mut pres = CounterPresence::default();
    for (host, space) in hosts {
        for plane in space.planes().filter(|p| is_device_plane(p.name())) {
            pres.device_planes += 1;
            let Some(chip) = plane
                .stat("global_chip_id")
                .and_then(|s| s.int())
                .or_else(|| plane.stat("device_id").and_then(|s| s.int()))
            else {
                continue;
            };
            pres.planes_with_chip_id += 1;
            let Some(cv) = plane.stat_id("counter_value") else {
                continue;
            };
            for line in plane.lines() {
                for e in line.events() {
                    // XProf reads the event's own stats here (`GetStat`, no metadata).
                    let Some(v) = e.stat_by_id(cv) else {
                        continue;
                    };
                    pres.counter_events += 1;
                    let value = v
                        .uint()
                        .or_else(|| v.double().map(|d| d as u64))
                        .unwrap_or(0);
                    let text =
                        |name: &str| e.stat(name).and_then(|s| s.str()).unwrap_or("").to_string();
                    let mut r = Map::new();
                    r.insert("Host".into(), json!(host));
                    r.insert("Chip".into(), json!(chip));
                    r.insert("Kernel".into(), json!(line.name()));
                    r.insert("Sample".into(), json!(line.id()));
                    r.insert("Counter".into(), json!(e.name().to_ascii_lowercase()));
                    r.insert("Value".into(), json!(value));
                    r.insert("Value_hex".into(), json!(format!("0x{value:x}")));
                    r.insert(
                        "Description".into(),
                        json!(text("performance_counter_description")),
                    );
                    r.insert("Set".into(), json!(text("performance_counter_sets")));
                    t.records.push(r);
                }
            }
        }
    }
    (t, pres)
}

pub const UTILIZATION_COLUMNS: &[&str] = &[
    "host", "device", "sample", "node", "name", "achieved", "peak", "unit",
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Gen {
    V6e,
    V7x,
}

impl Gen {
    fn frequency_hz(self) -> f64 {
        match self {
            Gen::V6e => 1.75e9,
            Gen::V7x => 1.9e9,
        }
    }
    fn peak_hbm_bytes_per_s(self) -> f64 {
        const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
        match self {
            Gen::V6e => 1525.5 * GIB,
            Gen::V7x => 3433.0 * GIB,
        }
    }
    fn cycles_per_xlu(self) -> u64 {
        match self {
            Gen::V6e => 4,
            Gen::V7x => 1,
        }
    }
    fn tc_cores(self) -> usize {
        match self {
            Gen::V6e => 1,
            Gen::V7x => 2,
        }
    }
}

/// One line's counters (id → value) with XProf's accessors.
struct Counters {
    values: HashMap<u64, u64>,
}

impl Counters {
    fn get(&self, id: Option<u64>) -> u64 {
        id.and_then(|i| self.values.get(&i).copied()).unwrap_or(0)
    }
}

struct Rows<'a> {
    t: &'a mut Table,
    device: i64,
    sample: i64,
}

impl Rows<'_> {
    fn add(&mut self, node: usize, name: &str, achieved: f64, peak: f64, unit: &str) {
        let mut r = Map::new();
        r.insert("host".into(), json!(0));
        r.insert("device".into(), json!(self.device));
        r.insert("sample".into(), json!(self.sample));
        r.insert("node".into(), json!(node));
        r.insert("name".into(), json!(name));
        r.insert("achieved".into(), json!(achieved));
        r.insert("peak".into(), json!(peak));
        r.insert("unit".into(), json!(unit));
        self.t.records.push(r);
    }
}

fn lookup(table: &[(&str, u64)], name: &str) -> Option<u64> {
    table.iter().find(|(n, _)| *n == name).map(|(_, id)| *id)
}

/// XProf `ComputeTpuGenericTcUnitUtilization` for one TensorCore.
fn tc_units(c: &Counters, g: Gen, core: usize, rows: &mut Rows) {
    let table = match (g, core) {
        (Gen::V6e, _) => V6E_TC,
        (Gen::V7x, 0) => V7X_TC_DIE0,
        (Gen::V7x, _) => V7X_TC_DIE1,
    };
    let k = |n: &str| c.get(lookup(table, n));
    let pw = |n: &str| {
        c.get(
            V7X_PWRMGR
                .iter()
                .find(|(d, m, _)| *d as usize == core && *m == n)
                .map(|x| x.2),
        )
    };
    let cycles = if g == Gen::V6e {
        k("CYCLES")
    } else {
        pw("CYCLE_COUNT")
    };
    if cycles == 0 {
        return;
    }
    let cy = cycles as f64;
    if g == Gen::V7x {
        rows.add(
            core,
            "Clocks Skipped",
            pw("CLOCKS_SKIPPED") as f64,
            cy,
            "cycles",
        );
        rows.add(
            core,
            "Ext Throttle Clocks Skipped",
            pw("EXT_THROTTLE_CLOCKS_SKIPPED") as f64,
            cy,
            "cycles",
        );
        rows.add(
            core,
            "LDIDT Droop Clocks Skipped",
            pw("LDIDT_DROOP_CLOCKS_SKIPPED") as f64,
            cy,
            "cycles",
        );
    }
    let sum = |names: &[String]| names.iter().map(|n| k(n)).sum::<u64>();
    let idx = |p: &str, n: usize| (0..n).map(|i| format!("{p}_{i}")).collect::<Vec<_>>();
    rows.add(
        core,
        "Scalar Unit",
        sum(&idx("SCALAR_ALU_INSTRUCTION", 2)) as f64,
        cy * 2.0,
        "instructions",
    );
    rows.add(
        core,
        "Vector ALUs",
        sum(&idx("VECTOR_ALU_INSTRUCTION", 4)) as f64,
        cy * 4.0,
        "instructions",
    );
    let vpu: u64 = ["FADD", "FMUL", "MISC", "INT", "FMAC"]
        .iter()
        .map(|o| sum(&idx(&format!("VPU_VALU_{o}_OPS"), 4)))
        .sum();
    rows.add(
        core,
        "VPU Utilization",
        vpu as f64,
        cy * 4.0,
        "instructions",
    );
    rows.add(
        core,
        "Vmem Stores",
        k("VST_INSTRUCTION") as f64,
        cy,
        "instructions",
    );
    rows.add(
        core,
        "Vmem Loads",
        sum(&idx("VLD_INSTRUCTION", 2)) as f64,
        cy * 2.0,
        "instructions",
    );
    rows.add(core, "No MXU Busy", k("MXU_BUSY_0") as f64, cy, "cycles");
    rows.add(core, "1 MXU Busy", k("MXU_BUSY_1") as f64, cy, "cycles");
    rows.add(core, "2 MXU Busy", k("MXU_BUSY_2") as f64, cy, "cycles");
    rows.add(
        core,
        "Avg MXU Busy",
        0.5 * k("MXU_BUSY_1") as f64 + k("MXU_BUSY_2") as f64,
        cy,
        "cycles",
    );
    // Cycles per MXU instruction by operand kind (XProf's constants).
    let m = |kind: &str, u: usize| k(&format!("MATMUL_{kind}_MXU_{u}"));
    let bf16 = |u: usize| match g {
        Gen::V6e => {
            4 * m("LMR_BF16", u)
                + 8 * m("VREG_F8", u)
                + 8 * m("VREG_BF16", u)
                + 4 * m("VREG_F32", u)
        }
        Gen::V7x => 4 * m("LMR_BF16", u) + 8 * m("VREG_BF16", u) + 4 * m("VREG_F32", u),
    };
    let i8c = |u: usize| 2 * m("LMR_I8", u) + 8 * m("VREG_I8", u);
    let i4c = |u: usize| 2 * m("LMR_I4", u) + 8 * m("VREG_I4", u);
    let f8 = |u: usize| 8 * m("VREG_F8", u);
    match g {
        Gen::V6e => {
            let mxu = |u: usize| bf16(u) + i8c(u) + i4c(u);
            rows.add(core, "MXU0", mxu(0) as f64, cy, "cycles");
            rows.add(core, "MXU1", mxu(1) as f64, cy, "cycles");
            rows.add(
                core,
                "MXU BF16",
                (bf16(0) + bf16(1)) as f64,
                cy * 2.0,
                "cycles",
            );
            rows.add(core, "MXU I8", (i8c(0) + i8c(1)) as f64, cy * 2.0, "cycles");
            rows.add(core, "MXU I4", (i4c(0) + i4c(1)) as f64, cy * 2.0, "cycles");
        }
        Gen::V7x => {
            let mxu = |u: usize| bf16(u) + f8(u);
            rows.add(core, "MXU0", mxu(0) as f64, cy, "cycles");
            rows.add(core, "MXU1", mxu(1) as f64, cy, "cycles");
            rows.add(
                core,
                "MXU BF16",
                (bf16(0) + bf16(1)) as f64,
                cy * 2.0,
                "cycles",
            );
            rows.add(
                core,
                "MXU E4M3 + E5M2",
                (f8(0) + f8(1)) as f64,
                cy * 2.0,
                "cycles",
            );
        }
    }
    rows.add(
        core,
        "MXU matpush",
        sum(&idx("MATPUSH_CYCLES_MXU", 2)) as f64,
        cy * 2.0,
        "cycles",
    );
    rows.add(core, "No XLU Busy", k("XLU_BUSY_0") as f64, cy, "cycles");
    rows.add(core, "1 XLU Busy", k("XLU_BUSY_1") as f64, cy, "cycles");
    rows.add(core, "2 XLUs Busy", k("XLU_BUSY_2") as f64, cy, "cycles");
    rows.add(
        core,
        "Avg XLU Busy",
        0.5 * k("XLU_BUSY_1") as f64 + k("XLU_BUSY_2") as f64,
        cy,
        "cycles",
    );
    // XProf divides cycles by the XLU issue cost in integers.
    let xlu_peak = (cycles / g.cycles_per_xlu()) as f64;
    for u in 0..2 {
        let v = k(&format!("PACKED_XLU_{u}"))
            + k(&format!("ROTATE_PERMUTE_INSTRUCTION_XLU_{u}"))
            + k(&format!("ROTATE_PERMUTE_SET_INSTRUCTION_XLU_{u}"))
            + k(&format!("TRANSPOSE_XLU_{u}"));
        rows.add(core, &format!("XLU{u}"), v as f64, xlu_peak, "instructions");
    }
}

/// SparseCore tile metrics in XProf's order: (v6e name, v7x name, counter).
const SC_TILE_METRICS: &[(&str, &str, &str)] = &[
    ("TEC Scalar Issue", "TEC Scalar Issue", "TEC_SCALAR_ISSUE"),
    (
        "TEC Scalar Issue: S0 slot",
        "TEC Scalar Issue: S0 slot",
        "TEC_S0_INSTRUCTION",
    ),
    (
        "TEC Scalar Issue: S1 slot",
        "TEC Scalar Issue: S1 slot",
        "TEC_S1_INSTRUCTION",
    ),
    (
        "TEC Scalar Issue: Smisc slot",
        "TEC Scalar Issue: Smisc slot",
        "TEC_SMISC_INSTRUCTION",
    ),
    ("SC Vector Issue", "SC Vector Issue", "VECTOR_ISSUE"),
    (
        "SC Vector Issue:V0 Slot",
        "SC Vector Issue: V0 Slot",
        "V0_INSTRUCTION",
    ),
    (
        "SC Vector Issue: V1 Slot",
        "SC Vector Issue: V1 Slot",
        "V1_INSTRUCTION",
    ),
    (
        "SC Vector Issue: V2 Slot",
        "SC Vector Issue: V2 Slot",
        "V2_INSTRUCTION",
    ),
    (
        "SC Vector Issue: VLD Slot",
        "SC Vector Issue: VLD Slot",
        "VLD_INSTRUCTION",
    ),
    (
        "SC Vector Issue: VST Slot",
        "SC Vector Issue: VST Slot",
        "VST_INSTRUCTION",
    ),
    (
        "SC Vector Issue:VEX Slot",
        "SC Vector Issue: VEX Slot",
        "VEX_INSTRUCTION",
    ),
    (
        "SC Vector Issue:VRES Slot",
        "SC Vector Issue: VRES Slot",
        "VRES_INSTRUCTION",
    ),
];

/// SparseCore sequencer (SCS) metrics: (name, counter).
const SC_SCS_METRICS: &[(&str, &str)] = &[
    ("SCS Scalar Issue", "SCALAR_ISSUE"),
    ("SCS: S0 Slot", "S0_INSTRUCTION"),
    ("SCS: S1 Slot", "S1_INSTRUCTION"),
    ("SCS: Smisc Slot", "SMISC_INSTRUCTION"),
];

/// XProf's SparseCore unit utilization of one SparseCore (`die`, `core`): per-tile issue
/// counts summed over the 16 tiles against 16 × tile-0 cycles, and the sequencer's issue
/// counts against its cycles.
fn sparse_core(c: &Counters, g: Gen, die: u8, core: u8, rows: &mut Rows) {
    type ScIndex = HashMap<(u8, u8, i8, &'static str), u64>;
    static V6E: std::sync::OnceLock<ScIndex> = std::sync::OnceLock::new();
    static V7X: std::sync::OnceLock<ScIndex> = std::sync::OnceLock::new();
    let index = |t: &'static [(u8, u8, i8, u8, u64)]| -> ScIndex {
        t.iter()
            .map(|x| ((x.0, x.1, x.2, SC_NAMES[usize::from(x.3)]), x.4))
            .collect()
    };
    let table = match g {
        Gen::V6e => V6E.get_or_init(|| index(V6E_SC)),
        Gen::V7x => V7X.get_or_init(|| index(V7X_SC)),
    };
    let id = |tile: i8, name: &'static str| table.get(&(die, core, tile, name)).copied();
    let node = match g {
        Gen::V6e => core as usize,
        Gen::V7x => ((die as usize) << 1) + core as usize,
    };
    let tile_cycles = c.get(id(0, "CYCLES")) as f64;
    for (v6, v7, counter) in SC_TILE_METRICS {
        let v: u64 = (0..16).map(|t| c.get(id(t, counter))).sum();
        let name = if g == Gen::V6e { v6 } else { v7 };
        rows.add(node, name, v as f64, tile_cycles * 16.0, "instructions");
    }
    let scs_cycles = c.get(id(-1, "CYCLES")) as f64;
    for (name, counter) in SC_SCS_METRICS {
        rows.add(
            node,
            name,
            c.get(id(-1, counter)) as f64,
            scs_cycles,
            "instructions",
        );
    }
}

/// XProf `ComputeTpuGenericBandwidthUtilization`: HBM bytes (32 per beat) against the peak
/// bandwidth over the TensorCore's cycles.
fn hbm(c: &Counters, g: Gen, core: usize, rows: &mut Rows) {
    const BYTES_PER_BEAT: u64 = 32;
    let (rd, wr, tc) = match (g, core) {
        (Gen::V6e, _) => (V6E_HBM_RD, V6E_HBM_WR, V6E_TC),
        (Gen::V7x, 0) => (V7X_HBM_RD_DIE0, V7X_HBM_WR_DIE0, V7X_TC_DIE0),
        (Gen::V7x, _) => (V7X_HBM_RD_DIE1, V7X_HBM_WR_DIE1, V7X_TC_DIE1),
    };
    // Up to 256 controllers: saturate rather than overflow on corrupt counters.
    let beats = |ids: &[u64]| {
        ids.iter()
            .fold(0u64, |a, i| a.saturating_add(c.get(Some(*i))))
    };
    let rd_bytes = beats(rd).saturating_mul(BYTES_PER_BEAT);
    let wr_bytes = beats(wr).saturating_mul(BYTES_PER_BEAT);
    let cycles = c.get(lookup(tc, "CYCLES"));
    if cycles == 0 {
        return;
    }
    let peak = g.peak_hbm_bytes_per_s() * (cycles as f64 / g.frequency_hz());
    let total = (rd_bytes + wr_bytes) as f64;
    rows.add(0, &format!("HBM Rd+Wr - core {core}"), total, peak, "bytes");
    if total > 0.0 {
        rows.add(core, "HBM Read Ratio", rd_bytes as f64, total, "percent");
        rows.add(core, "HBM Write Ratio", wr_bytes as f64, total, "percent");
    }
}

/// XProf `ComputeTpuGenericIciBandwidthUtilization` (per chip; repeated per TensorCore as
/// XProf does).
fn ici(c: &Counters, g: Gen, rows: &mut Rows) {
    const BYTES_PER_FLIT: u64 = 128;
    const PEAK_ICI_BPS: f64 = 294947368421.0526;
    let (rd, wr) = match g {
        Gen::V6e => (V6E_ICI_RD, V6E_ICI_WR),
        Gen::V7x => (V7X_ICI_RD, V7X_ICI_WR),
    };
    let rd_bytes: u64 = rd.iter().map(|i| c.get(Some(*i))).sum::<u64>() * BYTES_PER_FLIT;
    let wr_bytes: u64 = wr.iter().map(|i| c.get(Some(*i))).sum::<u64>() * BYTES_PER_FLIT;
    let cycles = match g {
        Gen::V6e => c.get(lookup(V6E_TC, "CYCLES")),
        Gen::V7x => c.get(
            V7X_PWRMGR
                .iter()
                .find(|(d, n, _)| *d == 0 && *n == "CYCLE_COUNT")
                .map(|x| x.2),
        ),
    };
    if cycles == 0 {
        return;
    }
    // XProf approximates the ICI clock as 1 GHz here.
    let peak = PEAK_ICI_BPS * (cycles as f64 / 1e9);
    rows.add(0, "ICI (Read)", rd_bytes as f64, peak, "bytes");
    rows.add(0, "ICI (Write)", wr_bytes as f64, peak, "bytes");
}

/// utilization_viewer: per TPU v6e/v7x plane with `device_id`, per line (sample), derived unit
/// utilizations from the line's counters: TensorCore units, HBM bandwidth, ICI and SparseCore
/// units as XProf computes them.
pub fn utilization_viewer(hosts: &[(String, XSpace)]) -> Table {
    let mut t = Table::new(UTILIZATION_COLUMNS);
    for (_, space) in hosts {
        for plane in space
            .planes()
            .filter(|p| p.name().starts_with("/device:TPU:"))
        {
            let Some(device) = plane.stat("device_id").and_then(|s| s.int()) else {
                continue;
            };
            let dt = plane
                .stat("device_type_string")
                .and_then(|s| s.str())
                .unwrap_or("");
            let g = match dt {
                "TPU v7x" => Gen::V7x,
                "TPU v6 Lite" => Gen::V6e,
                _ => continue,
            };
            for line in plane.lines() {
                let mut values = HashMap::new();
                for e in line.events() {
                    let mut id = e
                        .stat_or_metadata("performance_counter_id")
                        .and_then(|s| s.uint())
                        .unwrap_or(0);
                    if id == 0 {
                        id = e.metadata_id() as u64;
                    }
                    let Some(v) = e.stat_or_metadata("counter_value") else {
                        continue;
                    };
                    // XProf: the double value when non-zero, else the integer value.
                    let value = match v.value {
                        StatValue::Double(d) if d != 0.0 => {
                            if d < 0.0 {
                                0
                            } else {
                                d as u64
                            }
                        }
                        _ => v.uint().unwrap_or(0),
                    };
                    if id != 0 {
                        // Real counters stay far below 2^56; clamping keeps the formulas'
                        // integer sums and multiples from overflowing on corrupt input.
                        values.insert(id, value.min(1 << 56));
                    }
                }
                if values.is_empty() {
                    continue;
                }
                let c = Counters { values };
                let mut rows = Rows {
                    t: &mut t,
                    device,
                    sample: line.id(),
                };
                for core in 0..g.tc_cores() {
                    tc_units(&c, g, core, &mut rows);
                    hbm(&c, g, core, &mut rows);
                    ici(&c, g, &mut rows);
                }
                // SparseCores after the TensorCore metrics (two per die).
                let dies = if g == Gen::V7x { 2 } else { 1 };
                for die in 0..dies {
                    for core in 0..2 {
                        sparse_core(&c, g, die, core, &mut rows);
                    }
                }
            }
        }
    }
    t
}
