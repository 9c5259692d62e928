//! In-process timing of the memory views against `get_overview`'s work on the same capture:
//! `cargo run --release -p xprof-memory --example memory_bench -- <run dir or .xplane.pb> [runs]`.
//! Prints the median wall time of each view (the same library calls the tools make).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use xprof_memory::{modules, peak, profile, reshapes, viewer};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm the page cache
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    let arg = std::env::args()
        .nth(1)
        .expect("usage: memory_bench <run dir | .xplane.pb> [runs]");
    let runs: usize = std::env::args()
        .nth(2)
        .map_or(5, |r| r.parse().expect("runs"));
    let path = PathBuf::from(arg);
    let (dir, xspace) = if path.is_dir() {
        let x = std::fs::read_dir(&path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".xplane.pb"))
            .expect("no .xplane.pb in the directory");
        (path.clone(), x)
    } else {
        (
            path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            path.clone(),
        )
    };
    let hlo: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".hlo_proto.pb"))
        .collect();
    let xspaces = vec![xspace.clone()];

    let overview = time(runs, || {
        let (space, _) = xprof_opstats::load::load_host("host0", &xspace, &hlo).unwrap();
        let st = xprof_opstats::build(&space);
        std::hint::black_box(xprof_opstats::views::overview(&st));
    });
    let memory_profile = time(runs, || {
        let space = xprof_memory::open_xspace(&xspace, profile::wanted_plane).unwrap();
        std::hint::black_box(profile::build(&space).to_xprof_json());
    });
    let memory_viewer = time(runs, || {
        let mods = modules::list(&hlo, &xspaces).unwrap();
        if let Some(m) = mods.first() {
            let proto = modules::load(m).unwrap();
            std::hint::black_box(viewer::preprocess(&proto, 0).unwrap().to_xprof_json());
        }
    });
    let peak_allocations = time(runs, || {
        let mods = modules::list(&hlo, &xspaces).unwrap();
        let all: Vec<_> = modules::load_all(&mods)
            .unwrap()
            .iter()
            .filter_map(|(e, p)| {
                viewer::preprocess(p, 0)
                    .ok()
                    .map(|r| peak::module_peak(&e.name, &r, Default::default()))
            })
            .collect();
        std::hint::black_box(peak::rank(all, 10));
    });
    let unfused = time(runs, || {
        let mods = modules::list(&hlo, &xspaces).unwrap();
        let (space, _) = xprof_opstats::load::load_host("host0", &xspace, &hlo).unwrap();
        let st = xprof_opstats::build(&space);
        let ops: Vec<reshapes::OpTime> = xprof_opstats::views::op_db(&st)
            .map(|(db, _)| {
                db.metrics
                    .iter()
                    .map(|m| reshapes::OpTime {
                        program_id: m.program_id,
                        name: m.name.clone(),
                        occurrences: m.occurrences,
                        time_ps: m.time_ps,
                        self_time_ps: m.self_time_ps,
                        bytes_accessed: m.bytes_accessed,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let loaded = modules::load_all(&mods).unwrap();
        let refs = reshapes::ModuleRef::all(&loaded);
        std::hint::black_box(reshapes::detect(&refs, &ops));
    });
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("{} ({} runs, median)", xspace.display(), runs);
    println!(
        "{:<26} {:>9.2} ms",
        "get_overview (reference)",
        ms(overview)
    );
    for (name, d) in [
        ("get_memory_profile", memory_profile),
        ("get_memory_viewer", memory_viewer),
        ("get_peak_allocations", peak_allocations),
        ("detect_unfused_reshapes", unfused),
    ] {
        println!(
            "{name:<26} {:>9.2} ms  {:.2}x overview",
            ms(d),
            d.as_secs_f64() / overview.as_secs_f64()
        );
    }
}
