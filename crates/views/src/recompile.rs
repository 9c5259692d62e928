//! XLA compilations in the host trace, and how much of the steps they take. XProf's step
//! breakdown counts a compilation as host compute (its overview prints 0 compile time for a
//! PyTorch/XLA loop that recompiles at every step), and no XProf rule looks for it; a program
//! that recompiles in its steady state is one of the commonest reasons a JAX or PyTorch/XLA
//! step is slow.

use serde_json::{Value, json};
use xprof_opstats::OpStats;
use xprof_opstats::model::HostSpace;

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
    /// compilation, and the only trace a TensorFlow `jit_compile` compilation leaves.
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
            "compile_time_ps": self.total_ps,
            "steps": self.steps,
            "steps_with_compile": self.steps_with_compile,
            "steps_after_the_first_with_compile": self.later_steps_with_compile,
            "compile_percent_of_step_time_after_the_first": self.later_percent(),
        })
    }
}

/// The compile events of one host: the outermost per thread, with their part. Feed the spans
/// of every host of a run to [`CompileSpans::summarize`].
pub fn host_compile_spans(space: &HostSpace) -> CompileSpans {
    let mut spans: Vec<(i64, i64, Part)> = Vec::new();
    for plane in space.planes.iter().filter(|p| p.name == "/host:CPU") {
        // Names are classified once per metadata entry, not once per event (a host plane can
        // hold millions of events and a few thousand names).
        let parts: Vec<Option<Part>> = plane.metadata.iter().map(|m| part(&m.name)).collect();
        if parts.iter().all(Option::is_none) {
            continue;
        }
        for line in &plane.lines {
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
    CompileSpans(spans)
}

/// Compile events of one or more hosts (see [`host_compile_spans`]).
#[derive(Clone, Debug, Default)]
pub struct CompileSpans(Vec<(i64, i64, Part)>);

impl CompileSpans {
    pub fn extend(&mut self, other: CompileSpans) {
        self.0.extend(other.0);
    }

    /// The time covered by compile events, merged: `(begin, end)` in ps, sorted.
    fn covered(&self) -> Vec<(i64, i64)> {
        union(self.0.iter().map(|x| (x.0, x.1)).collect())
    }

    /// The time covered by compile events, to ask how much of it falls in a step.
    pub fn covering(&self) -> Covered {
        Covered(self.covered())
    }

    /// The compilations against the steps of `s` (same clock: the host planes' times, which
    /// XProf's step grouping also uses).
    pub fn summarize(&self, s: &OpStats) -> Compilations {
        // Compilations: the entry points' stretches of time, on any thread (JAX's
        // `backend_compile_and_load` runs around the PjRt client's `Compile` on another),
        // plus each backend run outside them (TensorFlow's jit_compile). The time: every
        // compile event.
        let entries = union(
            self.0
                .iter()
                .filter(|x| x.2 == Part::Entry)
                .map(|x| (x.0, x.1))
                .collect(),
        );
        let inside_entry = |b: i64, e: i64| entries.iter().any(|&(eb, ee)| b < ee && eb < e);
        let bare_backends = self
            .0
            .iter()
            .filter(|x| x.2 == Part::Backend && !inside_entry(x.0, x.1))
            .count();
        let spans = self.covered();
        let mut c = Compilations {
            count: entries.len() + bare_backends,
            total_ps: spans
                .iter()
                .map(|(b, e)| e.saturating_sub(*b) as u64)
                .fold(0, u64::saturating_add),
            steps: s.steps.steps.len(),
            ..Default::default()
        };
        for (i, step) in s.steps.steps.iter().enumerate() {
            let d = step.duration_ps();
            let inside = inside(&spans, step.begin_ps(), d);
            if inside > 0 {
                c.steps_with_compile += 1;
            }
            if i > 0 {
                c.later_step_ps = c.later_step_ps.saturating_add(d);
                c.later_compile_ps = c.later_compile_ps.saturating_add(inside);
                if inside > 0 {
                    c.later_steps_with_compile += 1;
                }
            }
        }
        c
    }
}

/// The time compile events cover (see [`CompileSpans::covering`]).
pub struct Covered(Vec<(i64, i64)>);

impl Covered {
    /// Compile time inside `[begin, begin + duration)`, at most `duration`.
    pub fn inside(&self, begin: i64, duration: u64) -> u64 {
        inside(&self.0, begin, duration)
    }
}

/// Time of the merged `spans` inside `[begin, begin + duration)`.
fn inside(spans: &[(i64, i64)], begin: i64, duration: u64) -> u64 {
    let end = begin.saturating_add(duration.min(i64::MAX as u64) as i64);
    spans
        .iter()
        .map(|&(cb, ce)| ce.min(end).saturating_sub(cb.max(begin)).max(0) as u64)
        .fold(0, u64::saturating_add)
        .min(duration)
}

/// The compilations in `run`'s host planes, against the steps of `s`.
pub fn compilations(s: &OpStats, run: &crate::LoadedRun) -> Compilations {
    let mut spans = CompileSpans::default();
    for h in &run.hosts {
        spans.extend(host_compile_spans(&h.model));
    }
    spans.summarize(s)
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
