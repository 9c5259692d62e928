fn main() {
    let p = std::env::args().nth(1).unwrap();
    let (lo, hi): (i64, i64) = (
        std::env::args().nth(2).unwrap().parse().unwrap(),
        std::env::args().nth(3).unwrap().parse().unwrap(),
    );
    let s = xprof_xspace::XSpace::open(&p).unwrap();
    for pl in s.planes() {
        if pl.name() != "/host:CPU" {
            continue;
        }
        for l in pl.lines() {
            for e in l.events() {
                let b = e.start_ps();
                let en = b + e.duration_ps();
                if en < lo || b > hi {
                    continue;
                }
                let st: Vec<String> = e
                    .stats()
                    .map(|s| {
                        format!(
                            "{}={:?}",
                            s.name(),
                            s.int()
                                .or(s.uint().map(|u| u as i64))
                                .map(|x| x.to_string())
                                .or(s.str().map(|x| x.to_string()))
                        )
                    })
                    .collect();
                println!(
                    "{:>20} {:12} {:50} {:>12} {:>10} {}",
                    l.id(),
                    &l.name()[..l.name().len().min(12)],
                    &e.name()[..e.name().len().min(50)],
                    b - lo,
                    e.duration_ps(),
                    st.join(" ")
                );
            }
        }
    }
}
