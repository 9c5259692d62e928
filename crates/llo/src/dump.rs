//! The LLO dump directory: `<ts>-<program>-<NN>-<pass_label>.txt` files, indexed as
//! program → compile instance (timestamp) → pass.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::{LLO_CAPTURE_FLAGS, LloError, Result, no_dir_message};

/// One pass file of one compile instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PassFile {
    pub label: String,
    /// The `<NN>` sequence number (`None` for files such as `TLP-hlo.txt`).
    pub num: Option<u32>,
    pub file: String,
}

/// One compilation of a program (all pass files sharing a timestamp).
#[derive(Clone, Debug, Default)]
pub struct Instance {
    pub ts: u64,
    /// label → file; a later file with the same label replaces an earlier one.
    pub passes: BTreeMap<String, PassFile>,
}

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub name: String,
    pub instances: BTreeMap<u64, Instance>,
}

impl Program {
    /// The compile instance with the most passes; ties go to the newest (highest ts), so the
    /// choice never depends on directory order.
    pub fn primary(&self) -> &Instance {
        self.instances
            .values()
            .max_by(|a, b| a.passes.len().cmp(&b.passes.len()).then(a.ts.cmp(&b.ts)))
            .expect("a program has at least one instance")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgramKind {
    Kernel,
    Fusion,
    Infrastructure,
}

impl ProgramKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProgramKind::Kernel => "kernel",
            ProgramKind::Fusion => "fusion",
            ProgramKind::Infrastructure => "infrastructure",
        }
    }
}

/// The seed's name-based classification (kept for its `kind` field).
pub fn classify(program: &str) -> ProgramKind {
    if matches!(
        program,
        "TLP" | "<late-initialization>" | "<late-finalization>"
    ) || program.starts_with("TLP")
    {
        ProgramKind::Infrastructure
    } else if program.contains("fusion") {
        ProgramKind::Fusion
    } else {
        ProgramKind::Kernel
    }
}

/// The whole directory, indexed.
#[derive(Clone, Debug)]
pub struct DumpIndex {
    pub dir: PathBuf,
    pub programs: BTreeMap<String, Program>,
    /// `.txt` files whose names did not parse (reported, never silently dropped).
    pub unparsed_files: Vec<String>,
}

static FNAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\d{10,})-(.+)\.(txt|html)$").unwrap());
static PASS_TOKEN_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"-(\d{2,4})-").unwrap());

/// A file name split into its parts (before the program prefix is chosen).
#[derive(Clone, Debug)]
struct RawName {
    ts: u64,
    rest: String,
    ext: String,
    /// Candidate `(program, pass number, label)` splits, left to right.
    splits: Vec<(String, u32, String)>,
}

fn raw_name(fname: &str) -> Option<RawName> {
    let c = FNAME_RE.captures(fname)?;
    let ts = c[1].parse().ok()?;
    let rest = c[2].to_string();
    let mut splits = Vec::new();
    // Every `-NN-` occurrence is a candidate (overlapping ones included: regex find_iter
    // would skip `-12-34-`'s second token), so scan each start position.
    let bytes = rest.as_bytes();
    for start in 0..bytes.len() {
        if bytes[start] != b'-' {
            continue;
        }
        if let Some(m) = PASS_TOKEN_RE.find_at(&rest, start)
            && m.start() == start
        {
            let num: u32 = rest[start + 1..m.end() - 1].parse().ok()?;
            splits.push((rest[..start].to_string(), num, rest[m.end()..].to_string()));
        }
    }
    Some(RawName {
        ts,
        rest,
        ext: c[3].to_string(),
        splits,
    })
}

/// Parse one file name on its own: the split at the *last* `-NN-` token (the seed's rule).
/// [`DumpIndex::scan`] refines this using the other files of the same timestamp.
pub fn parse_file_name(fname: &str) -> Option<(u64, String, Option<u32>, String)> {
    let r = raw_name(fname)?;
    match r.splits.last() {
        Some((p, n, l)) => Some((r.ts, p.clone(), Some(*n), l.clone())),
        None => Some((r.ts, r.rest, None, String::new())),
    }
}

impl DumpIndex {
    /// Resolve and scan a dump directory. A missing directory is a path error; a directory
    /// with no parseable `.txt` dump is "no data" naming the capture flags.
    pub fn open(dir: Option<PathBuf>) -> Result<DumpIndex> {
        let dir = dir.ok_or(LloError::DirNotGiven {
            what: "LLO dump directory (--dump_dir)",
            env: "XLA_JF_DUMP_DIR",
        })?;
        if !dir.is_dir() {
            return Err(LloError::DumpDirNotFound(dir));
        }
        let idx = Self::scan(&dir)?;
        if idx.programs.is_empty() {
            return Err(LloError::no_data(
                no_dir_message(&dir.display().to_string()),
                LLO_CAPTURE_FLAGS,
            ));
        }
        Ok(idx)
    }

    /// Index the top level of `dir` (no recursion).
    pub fn scan(dir: &Path) -> Result<DumpIndex> {
        Ok(Self::from_names(dir, &crate::dump_file_names(dir)?))
    }

    /// Build the index from file names (pure; used by `scan` and tests).
    pub fn from_names(dir: &Path, names: &[String]) -> DumpIndex {
        let mut raws = Vec::new();
        let mut unparsed = Vec::new();
        for n in names {
            match raw_name(n) {
                Some(r) if r.ext == "txt" => raws.push((n.clone(), r)),
                Some(_) => {}
                None if n.ends_with(".txt") => unparsed.push(n.clone()),
                None => {}
            }
        }
        // How many files of one timestamp could belong to each candidate program prefix.
        let mut support: HashMap<(u64, &str), usize> = HashMap::new();
        for (_, r) in &raws {
            let mut seen: Vec<&str> = Vec::new();
            for (p, _, _) in &r.splits {
                if !seen.contains(&p.as_str()) {
                    seen.push(p);
                    *support.entry((r.ts, p)).or_default() += 1;
                }
            }
        }
        let mut programs: BTreeMap<String, Program> = BTreeMap::new();
        for (fname, r) in &raws {
            // The split whose program prefix the most files of this timestamp share; ties go
            // to the rightmost split (the seed's rule), so lone files parse as before.
            let chosen = r
                .splits
                .iter()
                .enumerate()
                .max_by_key(|(i, (p, _, _))| (support.get(&(r.ts, p.as_str())).copied(), *i))
                .map(|(_, s)| s.clone());
            let (program, num, label) = match chosen {
                Some((p, n, l)) => (p, Some(n), l),
                None => (r.rest.clone(), None, String::new()),
            };
            let prog = programs.entry(program.clone()).or_insert_with(|| Program {
                name: program.clone(),
                instances: BTreeMap::new(),
            });
            let inst = prog.instances.entry(r.ts).or_insert_with(|| Instance {
                ts: r.ts,
                passes: BTreeMap::new(),
            });
            inst.passes.insert(
                label.clone(),
                PassFile {
                    label,
                    num,
                    file: fname.clone(),
                },
            );
        }
        DumpIndex {
            dir: dir.to_path_buf(),
            programs,
            unparsed_files: unparsed,
        }
    }

    /// A program by exact name; else an error listing close matches.
    pub fn program(&self, name: &str) -> Result<&Program> {
        if name.is_empty() {
            return Err(LloError::MissingArg("program"));
        }
        self.programs
            .get(name)
            .ok_or_else(|| LloError::ProgramNotFound {
                program: name.to_string(),
                close: self
                    .programs
                    .keys()
                    .filter(|p| p.contains(name) || name.contains(p.as_str()))
                    .take(5)
                    .cloned()
                    .collect(),
            })
    }

    pub fn path_of(&self, pf: &PassFile) -> PathBuf {
        self.dir.join(&pf.file)
    }
}

/// Which pass a query selects, and why (echoed to the caller).
#[derive(Clone, Debug)]
pub struct PassChoice<'a> {
    pub pass: &'a PassFile,
    pub selected_because: &'static str,
    /// Other labels the query also matched.
    pub also_matched: Vec<String>,
}

/// Find a pass: an exact label wins; otherwise `query` is a regex searched in each label,
/// and among the matches a `final_` label wins, then the highest pass number (never
/// alphabetical order: `pre-delay_…` sorts after `final_…` but is not the final schedule).
pub fn find_pass<'a>(inst: &'a Instance, query: &str) -> Result<PassChoice<'a>> {
    if let Some(p) = inst.passes.get(query) {
        return Ok(PassChoice {
            pass: p,
            selected_because: "exact label",
            also_matched: Vec::new(),
        });
    }
    let re = Regex::new(query).map_err(|e| LloError::InvalidArg {
        arg: "pass_label",
        message: format!("not a valid regex: {e}"),
    })?;
    let mut matches: Vec<&PassFile> = inst
        .passes
        .values()
        .filter(|p| re.is_match(&p.label))
        .collect();
    if matches.is_empty() {
        return Err(LloError::PassNotFound {
            query: query.to_string(),
            available: inst.passes.keys().take(20).cloned().collect(),
        });
    }
    matches.sort_by_key(|p| (p.label.starts_with("final_"), p.num, p.label.clone()));
    let best = matches.pop().expect("non-empty");
    let because = if best.label.starts_with("final_") {
        "regex match; final_ variant preferred"
    } else {
        "regex match; highest pass number"
    };
    Ok(PassChoice {
        pass: best,
        selected_because: because,
        also_matched: matches.iter().map(|p| p.label.clone()).collect(),
    })
}

/// Evidence that a program is a custom-call kernel (spec L8): the schedule analysis's
/// per-opcode table, else the bundle listing's `entry bundle:` comment. `(None, None)` when
/// neither file exists.
pub fn custom_call_evidence(
    idx: &DumpIndex,
    inst: &Instance,
) -> (Option<bool>, Option<&'static str>) {
    if let Some(p) = inst
        .passes
        .values()
        .find(|p| p.label.starts_with("schedule-analysis"))
        && let Ok(t) = crate::read_text(&idx.path_of(p))
    {
        return (
            Some(crate::schedule::parse(&t).has_custom_call()),
            Some("schedule-analysis per-opcode table"),
        );
    }
    if let Some(p) = inst.passes.get("final_bundles")
        && let Ok(head) = crate::read_head(&idx.path_of(p), 64 * 1024)
        && let Some(line) = head.lines().find(|l| l.contains("entry bundle:"))
    {
        return (
            Some(line.contains("custom-call")),
            Some("final_bundles entry-bundle comment"),
        );
    }
    (None, None)
}

/// Checkpoint presence, as `list_llo_programs` reports it.
pub fn checkpoints(inst: &Instance) -> serde_json::Value {
    let has = |f: &dyn Fn(&str) -> bool| inst.passes.keys().any(|l| f(l));
    serde_json::json!({
        "final_bundles": has(&|l| l == "final_bundles"),
        "per_bundle_utilization": has(&|l| l.contains("per-bundle-utilization")),
        "schedule_analysis": has(&|l| l.starts_with("schedule-analysis")),
        "static_gap_analysis": has(&|l| l.starts_with("static_gap_analysis")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_name_grammar() {
        let (ts, p, n, l) =
            parse_file_name("1783579467107688879-matmul_optimized.1-121-final_hlo-static-per-bundle-utilization.txt")
                .unwrap();
        assert_eq!(ts, 1783579467107688879);
        assert_eq!(p, "matmul_optimized.1");
        assert_eq!(n, Some(121));
        assert_eq!(l, "final_hlo-static-per-bundle-utilization");
        let (_, p, n, l) = parse_file_name("1783579467107688879-TLP-hlo.txt").unwrap();
        assert_eq!((p.as_str(), n, l.as_str()), ("TLP-hlo", None, ""));
        assert!(parse_file_name("123-short.txt").is_none());
    }

    #[test]
    fn split_prefers_prefix_shared_by_the_timestamp() {
        // A pass label containing `-07-` would fool the last-token rule.
        let names: Vec<String> = [
            "1000000000-prog-01-original.txt",
            "1000000000-prog-1000-final_bundles.txt",
            "1000000000-prog-02-foo-07-bar.txt",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let idx = DumpIndex::from_names(Path::new("/x"), &names);
        assert_eq!(idx.programs.keys().collect::<Vec<_>>(), vec!["prog"]);
        let inst = idx.programs["prog"].primary();
        assert_eq!(inst.passes["foo-07-bar"].num, Some(2));
        assert_eq!(inst.passes["final_bundles"].num, Some(1000));
    }

    #[test]
    fn pass_choice_prefers_final_then_highest_number() {
        let names: Vec<String> = [
            "1000000000-k-10-pre-delay_hlo-static-per-bundle-utilization.txt",
            "1000000000-k-09-final_hlo-static-per-bundle-utilization.txt",
            "1000000000-k-20-schedule-analysis_final_bundles.txt",
            "1000000000-k-21-final_bundles.txt",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let idx = DumpIndex::from_names(Path::new("/x"), &names);
        let inst = idx.programs["k"].primary();
        let c = find_pass(inst, "per-bundle-utilization").unwrap();
        assert_eq!(c.pass.label, "final_hlo-static-per-bundle-utilization");
        assert_eq!(
            find_pass(inst, "final_bundles").unwrap().pass.label,
            "final_bundles"
        );
        assert!(matches!(
            find_pass(inst, "nope"),
            Err(LloError::PassNotFound { .. })
        ));
        assert!(matches!(
            find_pass(inst, "("),
            Err(LloError::InvalidArg { .. })
        ));
    }

    #[test]
    fn primary_instance_ties_go_to_newest() {
        let names: Vec<String> = ["1000000000-k-01-a.txt", "2000000000-k-01-a.txt"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let idx = DumpIndex::from_names(Path::new("/x"), &names);
        assert_eq!(idx.programs["k"].primary().ts, 2000000000);
    }
}
