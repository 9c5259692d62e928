//! The official XProf CLI's `get_peak_allocations`: for every HLO module, its buffer
//! assignment's total and the buffers live at its peak (the memory viewer's `maxHeap`),
//! largest first, similar names (`copy.1`, `copy.2` of one size) aggregated into `copy.*`
//! and buffers under a threshold summed into "Others".

use serde_json::{Value, json};

use crate::viewer::PreprocessResult;

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// One row of a module's `top_buffers`.
#[derive(Clone, Debug, PartialEq)]
pub struct TopBuffer {
    pub instruction: String,
    pub size_bytes: i64,
    /// How many buffers the row stands for.
    pub count: usize,
}

/// One module's peak allocations.
#[derive(Clone, Debug, PartialEq)]
pub struct ModulePeak {
    pub module_name: String,
    /// Σ sizes of the module's allocations in the memory color (XProf's
    /// `totalBufferAllocationMib`, what the official CLI reports as `total_hbm_mib`).
    pub total_bytes: i64,
    /// The simulated peak (`peakHeapMib`).
    pub peak_heap_bytes: i64,
    pub top_buffers: Vec<TopBuffer>,
}

#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Buffers under this size (MiB) are summed into "Others" (when aggregating).
    pub min_size_mib: f64,
    pub aggregate: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            min_size_mib: 1.0,
            aggregate: true,
        }
    }
}

/// `name.123` → `name.*` (the official CLI's `([a-zA-Z_][a-zA-Z0-9_]*)\.\d+` full match).
fn base_name(inst: &str) -> Option<String> {
    let (stem, digits) = inst.rsplit_once('.')?;
    let mut chars = stem.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| format!("{stem}.*"))
}

/// Python's `str(float)` for the threshold in "Others (< 1.0 MiB)".
fn py_float(v: f64) -> String {
    format!("{v:?}")
}

/// One module's rows from its memory-viewer result.
pub fn module_peak(name: &str, r: &PreprocessResult, opt: Options) -> ModulePeak {
    let mut rows: Vec<(String, i64)> = Vec::new();
    let mut others = 0i64;
    for o in &r.max_heap {
        // The "small" bucket has no instruction; its label says what it is.
        let inst = if o.instruction_name.is_empty() {
            o.label.clone()
        } else {
            o.instruction_name.clone()
        };
        if opt.aggregate && mib(o.size_bytes) < opt.min_size_mib {
            others = others.saturating_add(o.size_bytes);
            continue;
        }
        rows.push((inst, o.size_bytes));
    }
    let mut out: Vec<TopBuffer> = Vec::new();
    if opt.aggregate {
        // Group by (base name, size), first occurrence order.
        let mut groups: Vec<(String, i64, Vec<String>)> = Vec::new();
        for (inst, size) in rows {
            let base = base_name(&inst).unwrap_or_else(|| inst.clone());
            match groups.iter_mut().find(|g| g.0 == base && g.1 == size) {
                Some(g) => g.2.push(inst),
                None => groups.push((base, size, vec![inst])),
            }
        }
        for (base, size, insts) in groups {
            if insts.len() > 1 {
                out.push(TopBuffer {
                    instruction: format!(
                        "{base} ({} occurrences of size {} MiB)",
                        insts.len(),
                        xprof_hlo::print::format_g(mib(size), 6)
                    ),
                    size_bytes: size.saturating_mul(insts.len() as i64),
                    count: insts.len(),
                });
            } else {
                out.push(TopBuffer {
                    instruction: insts[0].clone(),
                    size_bytes: size,
                    count: 1,
                });
            }
        }
        if others > 0 {
            out.push(TopBuffer {
                instruction: format!("Others (< {} MiB)", py_float(opt.min_size_mib)),
                size_bytes: others,
                count: 0,
            });
        }
    } else {
        out = rows
            .into_iter()
            .map(|(instruction, size_bytes)| TopBuffer {
                instruction,
                size_bytes,
                count: 1,
            })
            .collect();
    }
    // Stable: equal sizes keep first-occurrence order (as Python's sort).
    out.sort_by_key(|b| std::cmp::Reverse(b.size_bytes));
    ModulePeak {
        module_name: name.to_string(),
        total_bytes: r.total_buffer_allocation_bytes,
        peak_heap_bytes: r.peak_heap_bytes,
        top_buffers: out,
    }
}

/// Modules largest first (stable on ties); `limit` 0 = all.
pub fn rank(mut modules: Vec<ModulePeak>, limit: usize) -> Vec<ModulePeak> {
    modules.sort_by_key(|m| std::cmp::Reverse(m.total_bytes));
    if limit > 0 {
        modules.truncate(limit);
    }
    modules
}

impl ModulePeak {
    pub fn to_json(&self) -> Value {
        json!({
            "module_name": self.module_name,
            "total_hbm_mib": mib(self.total_bytes),
            "total_hbm_bytes": self.total_bytes,
            "peak_heap_mib": mib(self.peak_heap_bytes),
            "peak_heap_bytes": self.peak_heap_bytes,
            "top_buffers": self.top_buffers.iter().map(|b| json!({
                "instruction": b.instruction,
                "size_mib": mib(b.size_bytes),
                "size_bytes": b.size_bytes,
                "count": b.count,
            })).collect::<Vec<_>>(),
        })
    }
}
