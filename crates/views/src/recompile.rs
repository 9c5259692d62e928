//! XLA compilations in the host trace, and how much of the steps they take. XProf's step
//! breakdown counts a compilation as host compute (its overview prints 0 compile time for a
//! PyTorch/XLA loop that recompiles at every step), and no XProf rule looks for it; a program
//! that recompiles in its steady state is one of the commonest reasons a JAX or PyTorch/XLA
//! step is slow.

use serde_json::{Value, json};
use xprof_opstats::OpStats;

/// What part of a compilation an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// A runtime's compile entry point: PjRt clients (`PjRtCpuClient::Compile`,
    /// `PjRtStreamExecutorClient::Compile`, `PjRtCApiClient::Compile`, …), PyTorch/XLA
    /// (`XLAGraphExecutor::Compile`, `PjRtComputationClient::Compile`), JAX
    /// (`backend_compile_and_load`, `backend_compile`), TensorFlow (`XlaCompile`,
    /// `_XlaCompile`, `TfrtCompile`). The compiler's own `…::Compile` (`JitCompiler`, …) runs
    /// inside one of these or inside the backend, and counts once.
    Entry,
    /// XLA's backend (`CpuCompiler::RunBackend`, `GpuCompiler::RunBackend`): once per
    /// compilation, and the only trace of one TensorFlow's `jit_compile` leaves.
    Backend,
    /// XLA's HLO passes (`…Compiler::RunHloPasses`, `HLO passes …`), before the backend.
    Passes,
}

fn part(name: &str) -> Option<Part> {
    // Python-tracer events (`$file.py:line function`) repeat the TraceMe they wrap.
    if name.starts_with('$') {
        return None;
    }
    if name.ends_with("::Compile")
        || matches!(
            name,
            "backend_compile_and_load"
                | "backend_compile"
                | "XlaCompile"
                | "_XlaCompile"
                | "TfrtCompile"
        )
    {
        Some(Part::Entry)
    } else if name.ends_with("Compiler::RunBackend") {
        Some(Part::Backend)
    } else if name.ends_with("Compiler::RunHloPasses") || name.starts_with("HLO passes ") {
        Some(Part::Passes)
    } else {
        None
    }
}

/// Sorted, overlapping spans merged.
fn union(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
    for (b, e) in spans {
        match merged.last_mut() {
            Some(last) if b <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((b, e)),
        }
    }
    merged
}

/// The compilations of a run and their overlap with the steps: compile events nested in one
/// another, or running inside one another on two threads, count once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Compilations {
    /// Compilations: runtime entry points (overlapping ones once), and XLA backend runs
    /// outside them.
    pub count: usize,
    /// The time covered by compile events (entry points, HLO passes, backends).
    pub total_ps: u64,
    /// Steps (in step order) and how many of them hold compile time; the first step is apart:
    /// a program usually compiles at its first call.
    pub steps: usize,
    pub steps_with_compile: usize,
    pub later_steps_with_compile: usize,
    /// Σ step time and Σ compile time inside steps, without the first step.
    pub later_step_ps: u64,
    pub later_compile_ps: u64,
}

impl Compilations {
    /// Compile time as % of the step time after the first step (`None` without such steps).
    pub fn later_percent(&self) -> Option<f64> {
        (self.later_step_ps > 0)
            .then(|| 100.0 * self.later_compile_ps as f64 / self.later_step_ps as f64)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "compilations": self.count,
            "compile_time_ms": self.total_ps as f64 / 1e9,
            "steps": self.steps,
            "steps_with_compile": self.steps_with_compile,
            "steps_after_the_first_with_compile": self.later_steps_with_compile,
            "compile_percent_of_step_time_after_the_first": self.later_percent(),
        })
    }
}

/// The compilations in `run`'s host planes, against the steps of `s` (same clock: the host
/// planes' times, which XProf's step grouping also uses).
pub fn compilations(s: &OpStats, run: &crate::LoadedRun) -> Compilations {
    let mut spans: Vec<(i64, i64, Part)> = Vec::new();
    for h in &run.hosts {
        for plane in h.model.planes.iter().filter(|p| p.name == "/host:CPU") {
            // Names are classified once per metadata entry, not once per event (a host plane
            // can hold millions of events and a few thousand names).
            let parts: Vec<Option<Part>> = plane.metadata.iter().map(|m| part(&m.name)).collect();
            if parts.iter().all(Option::is_none) {
                continue;
            }
            for line in &plane.lines {
                // The outermost compile events of the thread.
                let mut events: Vec<_> = line
                    .events
                    .iter()
                    .filter(|e| e.duration_ps > 0)
                    .filter_map(|e| {
                        parts
                            .get(e.metadata as usize)
                            .copied()
                            .flatten()
                            .map(|k| (e, k))
                    })
                    .collect();
                events.sort_by_key(|(e, _)| (e.start_ps, std::cmp::Reverse(e.duration_ps)));
                let mut end_of_open = i64::MIN;
                for (e, k) in events {
                    if e.start_ps >= end_of_open {
                        end_of_open = e.end_ps();
                        spans.push((e.start_ps, e.end_ps(), k));
                    }
                }
            }
        }
    }
    // Compilations: the entry points' stretches of time, on any thread (JAX's
    // `backend_compile_and_load` runs around the PjRt client's `Compile` on another), plus
    // each backend run outside them (TensorFlow's jit_compile). The time: every compile event.
    let entries = union(
        spans
            .iter()
            .filter(|x| x.2 == Part::Entry)
            .map(|x| (x.0, x.1))
            .collect(),
    );
    let inside_entry = |b: i64, e: i64| entries.iter().any(|&(eb, ee)| b < ee && eb < e);
    let bare_backends = spans
        .iter()
        .filter(|x| x.2 == Part::Backend && !inside_entry(x.0, x.1))
        .count();
    let count = entries.len() + bare_backends;
    let spans = union(spans.into_iter().map(|x| (x.0, x.1)).collect());
    let mut c = Compilations {
        count,
        total_ps: spans
            .iter()
            .map(|(b, e)| e.saturating_sub(*b) as u64)
            .fold(0, u64::saturating_add),
        steps: s.steps.steps.len(),
        ..Default::default()
    };
    for (i, step) in s.steps.steps.iter().enumerate() {
        let (b, d) = (step.begin_ps(), step.duration_ps());
        let e = b.saturating_add(d.min(i64::MAX as u64) as i64);
        let inside: u64 = spans
            .iter()
            .map(|&(cb, ce)| ce.min(e).saturating_sub(cb.max(b)).max(0) as u64)
            .fold(0, u64::saturating_add);
        if inside > 0 {
            c.steps_with_compile += 1;
        }
        if i > 0 {
            c.later_step_ps = c.later_step_ps.saturating_add(d);
            c.later_compile_ps = c.later_compile_ps.saturating_add(inside.min(d));
            if inside > 0 {
                c.later_steps_with_compile += 1;
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::{Part, part};

    fn is_compile(name: &str) -> bool {
        part(name).is_some()
    }

    #[test]
    fn compile_entry_points_of_each_runtime_count_python_frames_do_not() {
        for n in [
            "PjRtCpuClient::Compile",
            "PjRtStreamExecutorClient::Compile",
            "XLAGraphExecutor::Compile",
            "backend_compile_and_load",
            "XlaCompile",
            "CpuCompiler::RunBackend",
            "HLO passes through layout assignment",
        ] {
            assert!(is_compile(n), "{n}");
        }
        for n in [
            "$compiler.py:292 backend_compile_and_load",
            "CpuCompiler::CompileCpuExecutable",
            "PjRtCpuExecutable::ExecuteHelper",
            "compile",
        ] {
            assert!(!is_compile(n), "{n}");
        }
        assert_eq!(part("CpuCompiler::RunBackend"), Some(Part::Backend));
        assert_eq!(part("JitCompiler::Compile"), Some(Part::Entry));
    }
}
