//! In-process timing of each view against the overview on one capture (the ×200 benchmark:
//! `cargo run --release -p xprof-views --example bench_views -- <run dir> [reps]`). Prints the
//! median wall time of each view, end to end from the files, and its ratio to the overview.

use std::path::PathBuf;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).expect("run dir"));
    let reps: usize = std::env::args().nth(2).map_or(5, |s| s.parse().unwrap());
    let mut hosts = Vec::new();
    let mut hlo = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(s) = n.strip_suffix(".xplane.pb") {
            hosts.push((s.to_string(), p.clone()));
        } else if n.ends_with(".hlo_proto.pb") {
            hlo.push(p);
        }
    }
    let time = |f: &dyn Fn()| {
        median(
            (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        )
    };
    let with_stats = |f: &dyn Fn(&xprof_views::LoadedRun, &xprof_opstats::OpStats)| {
        let r = xprof_views::load::load_hosts(&hosts, &hlo).unwrap();
        let s = r.op_stats().unwrap();
        f(&r, &s);
    };
    // Warm the page cache and the allocator before timing anything.
    with_stats(&|_, s| {
        std::hint::black_box(xprof_opstats::views::overview(s));
    });
    let overview = time(&|| {
        with_stats(&|_, s| {
            std::hint::black_box(xprof_opstats::views::overview(s));
        })
    });
    println!("overview                {overview:9.1} ms");
    let rows: Vec<(&str, f64)> = vec![
        (
            "pod_viewer",
            time(&|| {
                with_stats(&|r, s| {
                    std::hint::black_box(xprof_views::pod::pod_viewer(s, &r.core_details()));
                })
            }),
        ),
        (
            "input_pipeline",
            time(&|| {
                with_stats(&|r, s| {
                    std::hint::black_box(xprof_views::input_pipeline::input_pipeline(
                        s,
                        &r.core_details(),
                    ));
                })
            }),
        ),
        (
            "framework_op_stats",
            time(&|| {
                with_stats(&|_, s| {
                    std::hint::black_box(xprof_views::framework::table(s, false).to_json(40));
                })
            }),
        ),
        (
            "smart_suggestions",
            time(&|| {
                with_stats(&|r, s| {
                    let ip = xprof_views::input_pipeline::input_pipeline(s, &r.core_details());
                    std::hint::black_box(xprof_views::suggestions::smart_suggestions(
                        &xprof_views::suggestions::signals(s, &ip),
                    ));
                })
            }),
        ),
        (
            "check_host_boundness",
            time(&|| {
                let (r, raw) =
                    xprof_views::load::load_with_raw(&hosts, &hlo, xprof_views::load::tpu_planes)
                        .unwrap();
                let s = r.op_stats().unwrap();
                let ip = xprof_views::input_pipeline::input_pipeline(&s, &r.core_details());
                let _ = xprof_views::counters::utilization_viewer(&raw);
                std::hint::black_box(xprof_views::suggestions::host_boundness(&s, &ip, None));
            }),
        ),
        (
            "kernel_stats",
            time(&|| {
                let raw =
                    xprof_views::load::load_raw(&hosts, xprof_views::load::device_planes).unwrap();
                std::hint::black_box(xprof_views::kernel::kernel_stats(&raw).table().to_json(50));
            }),
        ),
        (
            "perf_counters",
            time(&|| {
                let raw =
                    xprof_views::load::load_raw(&hosts, xprof_views::load::device_planes).unwrap();
                std::hint::black_box(xprof_views::counters::perf_counters(&raw).to_json(100));
            }),
        ),
        (
            "utilization_viewer",
            time(&|| {
                let raw =
                    xprof_views::load::load_raw(&hosts, xprof_views::load::device_planes).unwrap();
                std::hint::black_box(xprof_views::counters::utilization_viewer(&raw).to_json(100));
            }),
        ),
        (
            "megascale_stats",
            time(&|| {
                let space =
                    xprof_views::load::read_raw(&hosts[0].1, xprof_views::load::megascale_planes)
                        .unwrap();
                std::hint::black_box(
                    xprof_views::megascale::megascale_stats_with_hlo(&space, &hlo).table(),
                );
            }),
        ),
    ];
    for (n, t) in rows {
        println!("{n:23} {t:9.1} ms  {:5.2}× overview", t / overview);
    }
    // The views' own cost on top of the shared load + OpStats build.
    let r = xprof_views::load::load_hosts(&hosts, &hlo).unwrap();
    let s = r.op_stats().unwrap();
    let load_build = time(&|| {
        let r = xprof_views::load::load_hosts(&hosts, &hlo).unwrap();
        std::hint::black_box(r.op_stats());
    });
    println!(
        "load + OpStats build    {load_build:9.1} ms (shared by overview and the OpStats views)"
    );
    let only: Vec<(&str, f64)> = vec![
        (
            "overview only",
            time(&|| {
                std::hint::black_box(xprof_opstats::views::overview(&s));
            }),
        ),
        (
            "pod_viewer only",
            time(&|| {
                std::hint::black_box(xprof_views::pod::pod_viewer(&s, &r.core_details()));
            }),
        ),
        (
            "input_pipeline only",
            time(&|| {
                std::hint::black_box(xprof_views::input_pipeline::input_pipeline(
                    &s,
                    &r.core_details(),
                ));
            }),
        ),
        (
            "framework_op_stats only",
            time(&|| {
                std::hint::black_box(xprof_views::framework::table(&s, false).to_json(40));
            }),
        ),
    ];
    for (n, t) in only {
        println!("{n:23} {t:9.3} ms");
    }
}
