//! The charts of the report, drawn as inline SVG: a stacked bar chart, a horizontal bar chart,
//! a log-log scatter with roofs and a step line. Tooltips are SVG `<title>`s (no script).

use std::fmt::Write;

use crate::esc;

/// Okabe & Ito's colour-blind safe palette (blue, orange, bluish green, vermillion, sky blue,
/// reddish purple, yellow, grey), in the order series take them.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#999999",
];

const W: f64 = 880.0;
const H: f64 = 320.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 48.0;

fn open(out: &mut String, id: &str, h: f64, label: &str) {
    let _ = write!(
        out,
        r#"<svg id="{id}" class="chart" role="img" aria-label="{}" viewBox="0 0 {W} {h}" width="{W}" height="{h}" font-family="sans-serif" font-size="12">"#,
        esc(label)
    );
}

/// A "nice" step (1, 2 or 5 × 10^k) giving about `n` ticks over `[0, max]`.
fn nice_step(max: f64, n: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / n;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A number for an axis or a label: at most 3 significant decimals, no trailing zeros.
pub fn num(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Horizontal grid lines and y labels for `[0, ymax]`; returns the scale's top.
fn y_axis(out: &mut String, ymax: f64, unit: &str, plot_h: f64) -> f64 {
    let step = nice_step(ymax, 5.0);
    let top = (ymax / step).ceil().max(1.0) * step;
    let mut v = 0.0;
    while v <= top + step * 1e-9 {
        let y = TOP + plot_h - v / top * plot_h;
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            num(v)
        );
        v += step;
    }
    let _ = write!(
        out,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        esc(unit)
    );
    top
}

/// Stacked bars: one bar per `bars` entry (label, one value per series), series named by
/// `series`. Series that are zero everywhere are left out of the legend.
pub fn stacked_bars(
    id: &str,
    series: &[String],
    bars: &[(String, Vec<f64>)],
    unit: &str,
    x_label: &str,
) -> String {
    let used: Vec<usize> = (0..series.len())
        .filter(|&i| {
            bars.iter()
                .any(|(_, v)| v.get(i).copied().unwrap_or(0.0) > 0.0)
        })
        .collect();
    let legend_rows = used.len().div_ceil(4) as f64;
    let h = H + legend_rows * 18.0;
    let plot_h = H - TOP - BOTTOM;
    let plot_w = W - LEFT - RIGHT;
    let mut out = String::new();
    open(&mut out, id, h, x_label);
    let ymax = bars
        .iter()
        .map(|(_, v)| v.iter().filter(|x| **x > 0.0).sum::<f64>())
        .fold(0.0, f64::max);
    let top = y_axis(&mut out, ymax, unit, plot_h);
    let n = bars.len().max(1) as f64;
    let slot = plot_w / n;
    let bw = (slot * 0.8).max(0.5);
    let label_every = (bars.len() / 20).max(1);
    for (k, (label, values)) in bars.iter().enumerate() {
        let x = LEFT + k as f64 * slot + (slot - bw) / 2.0;
        let mut y = TOP + plot_h;
        for (j, &i) in used.iter().enumerate() {
            let v = values.get(i).copied().unwrap_or(0.0);
            if v <= 0.0 {
                continue;
            }
            let hgt = v / top * plot_h;
            y -= hgt;
            let _ = write!(
                out,
                r#"<rect x="{x:.2}" y="{y:.2}" width="{bw:.2}" height="{hgt:.2}" fill="{}"><title>{} — {}: {} {}</title></rect>"#,
                PALETTE[j % PALETTE.len()],
                esc(label),
                esc(&series[i]),
                num(v),
                esc(unit)
            );
        }
        if k % label_every == 0 {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                x + bw / 2.0,
                TOP + plot_h + 16.0,
                esc(label)
            );
        }
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        TOP + plot_h + 36.0,
        esc(x_label)
    );
    for (j, &i) in used.iter().enumerate() {
        let (col, row) = ((j % 4) as f64, (j / 4) as f64);
        let (x, y) = (LEFT + col * 200.0, H + row * 18.0);
        let _ = write!(
            out,
            r#"<rect x="{x}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{}" y="{:.1}">{}</text>"#,
            y - 10.0,
            PALETTE[j % PALETTE.len()],
            x + 16.0,
            y,
            esc(&series[i])
        );
    }
    out.push_str("</svg>");
    out
}

/// Horizontal bars, largest first as given: (label, value, note shown after the bar).
pub fn hbars(id: &str, items: &[(String, f64, String)], unit: &str) -> String {
    let row = 22.0;
    let label_w = 300.0;
    let h = TOP + items.len() as f64 * row + 40.0;
    // Room after the longest bar for its value and note.
    let plot_w = W - label_w - 260.0;
    let mut out = String::new();
    open(&mut out, id, h, unit);
    let max = items.iter().map(|i| i.1).fold(0.0, f64::max);
    let max = if max > 0.0 { max } else { 1.0 };
    for (k, (label, v, note)) in items.iter().enumerate() {
        let y = TOP + k as f64 * row;
        let w = (v / max * plot_w).max(1.0);
        row_label(&mut out, label, label_w, y);
        let _ = write!(
            out,
            r##"<rect x="{label_w}" y="{:.1}" width="{w:.2}" height="{:.1}" fill="{}"><title>{}: {} {}</title></rect><text x="{:.1}" y="{:.1}">{} {} {}</text>"##,
            y + 3.0,
            row - 6.0,
            PALETTE[0],
            esc(label),
            num(*v),
            esc(unit),
            label_w + w + 6.0,
            y + 15.0,
            num(*v),
            esc(unit),
            esc(note)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text></svg>"#,
        label_w + plot_w / 2.0,
        h - 12.0,
        esc(unit)
    );
    out
}

/// Horizontal bars around zero (changes): negative to the left in blue (faster), positive to
/// the right in vermillion (slower); (label, value, note).
pub fn delta_bars(id: &str, items: &[(String, f64, String)], unit: &str) -> String {
    let row = 22.0;
    let label_w = 300.0;
    let h = TOP + items.len() as f64 * row + 40.0;
    let plot_w = W - label_w - 40.0;
    let zero = label_w + plot_w / 2.0;
    let max = items.iter().map(|i| i.1.abs()).fold(0.0, f64::max);
    let max = if max > 0.0 { max } else { 1.0 };
    let half = plot_w / 2.0 - 90.0;
    let mut out = String::new();
    open(&mut out, id, h, unit);
    let _ = write!(
        out,
        r##"<line x1="{zero}" x2="{zero}" y1="{TOP}" y2="{:.1}" stroke="#555"/>"##,
        h - 36.0
    );
    for (k, (label, v, note)) in items.iter().enumerate() {
        let y = TOP + k as f64 * row;
        let w = (v.abs() / max * half).max(1.0);
        let (x, colour, tx, anchor) = if *v < 0.0 {
            (zero - w, PALETTE[0], zero - w - 4.0, "end")
        } else {
            (zero, PALETTE[3], zero + w + 4.0, "start")
        };
        row_label(&mut out, label, label_w, y);
        let _ = write!(
            out,
            r#"<rect x="{x:.2}" y="{:.1}" width="{w:.2}" height="{:.1}" fill="{colour}"><title>{}: {} {} {}</title></rect><text x="{tx:.1}" y="{:.1}" text-anchor="{anchor}">{}{} {}</text>"#,
            y + 3.0,
            row - 6.0,
            esc(label),
            num(*v),
            esc(unit),
            esc(note),
            y + 15.0,
            if *v > 0.0 { "+" } else { "" },
            num(*v),
            esc(unit)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{zero:.1}" y="{:.1}" text-anchor="middle">change ({}; left faster, right slower)</text></svg>"#,
        h - 12.0,
        esc(unit)
    );
    out
}

/// A bar's label, right-aligned before `label_w`: cut to 44 characters, whole in its tooltip.
fn row_label(out: &mut String, label: &str, label_w: f64, y: f64) {
    let short: String = if label.chars().count() > 44 {
        label.chars().take(43).chain(['…']).collect()
    } else {
        label.to_string()
    };
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end"><title>{}</title>{}</text>"#,
        label_w - 8.0,
        y + 15.0,
        esc(label),
        esc(&short)
    );
}

/// A point of the roofline: operational intensity (FLOP/byte), rate (GFLOP/s).
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub label: String,
    /// Drawn as a diamond in the second colour (custom calls) instead of a dot.
    pub marked: bool,
}

/// A memory roof: bandwidth (GB/s) up to the compute peak (GFLOP/s).
pub struct Roof {
    pub name: String,
    pub bandwidth: f64,
}

fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    (a..=b).map(|e| 10f64.powi(e)).collect()
}

/// A log-log roofline: the roofs (min(peak, bandwidth × intensity)), their ridge points and
/// the ops.
pub fn roofline(id: &str, peak: f64, roofs: &[Roof], points: &[Point]) -> String {
    let plot_h = H - TOP - BOTTOM;
    let plot_w = W - LEFT - RIGHT;
    let ridges: Vec<f64> = roofs
        .iter()
        .filter(|r| r.bandwidth > 0.0)
        .map(|r| peak / r.bandwidth)
        .collect();
    let xs = points.iter().map(|p| p.x).chain(ridges.iter().copied());
    let x_lo = xs.clone().fold(f64::INFINITY, f64::min).max(1e-6) / 10.0;
    let x_hi = xs.fold(0.0, f64::max).max(1.0) * 10.0;
    let ys = points.iter().map(|p| p.y).filter(|y| *y > 0.0);
    let y_lo = ys.clone().fold(peak, f64::min).min(
        roofs
            .iter()
            .map(|r| r.bandwidth * x_lo)
            .fold(peak, f64::min),
    ) / 10.0;
    let y_hi = peak * 3.0;
    let (lx0, lx1, ly0, ly1) = (x_lo.log10(), x_hi.log10(), y_lo.log10(), y_hi.log10());
    let sx = |x: f64| LEFT + (x.log10() - lx0) / (lx1 - lx0) * plot_w;
    let sy = |y: f64| TOP + plot_h - (y.log10() - ly0) / (ly1 - ly0) * plot_h;
    let mut out = String::new();
    open(&mut out, id, H, "roofline");
    for t in log_ticks(x_lo, x_hi) {
        if t < x_lo || t > x_hi {
            continue;
        }
        let x = sx(t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 16.0,
            num(t)
        );
    }
    for t in log_ticks(y_lo, y_hi) {
        if t < y_lo || t > y_hi {
            continue;
        }
        let y = sy(t);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            num(t)
        );
    }
    for (i, r) in roofs.iter().enumerate().filter(|(_, r)| r.bandwidth > 0.0) {
        let ridge = peak / r.bandwidth;
        let start = x_lo.max(y_lo / r.bandwidth);
        let colour = PALETTE[(i + 2) % PALETTE.len()];
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}"><title>{}: {} GB/s, ridge point {} FLOP/byte</title></polyline><circle cx="{:.1}" cy="{:.1}" r="4" fill="{colour}"/><text x="{:.1}" y="{:.1}" fill="{colour}">{} ridge {}</text>"#,
            sx(start),
            sy(r.bandwidth * start),
            sx(ridge),
            sy(peak),
            sx(x_hi),
            sy(peak),
            esc(&r.name),
            num(r.bandwidth),
            num(ridge),
            sx(ridge),
            sy(peak),
            sx(ridge) + 6.0,
            sy(peak) + 16.0 + 14.0 * i as f64,
            esc(&r.name),
            num(ridge)
        );
    }
    for p in points.iter().filter(|p| p.x > 0.0 && p.y > 0.0) {
        let (x, y) = (sx(p.x.clamp(x_lo, x_hi)), sy(p.y.clamp(y_lo, y_hi)));
        let title = format!("{}: {} FLOP/byte, {} GFLOP/s", p.label, num(p.x), num(p.y));
        if p.marked {
            let _ = write!(
                out,
                r#"<path d="M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z" fill="{}" stroke="black"><title>{} (custom call)</title></path>"#,
                y - 6.0,
                x + 6.0,
                y + 6.0,
                x - 6.0,
                PALETTE[1],
                esc(&title)
            );
        } else {
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{}" fill-opacity="0.8"><title>{}</title></circle>"#,
                PALETTE[0],
                esc(&title)
            );
        }
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">operational intensity (FLOP/byte, log)</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">GFLOP/s (log)</text></svg>"#,
        LEFT + plot_w / 2.0,
        TOP + plot_h + 36.0,
        TOP + plot_h / 2.0
    );
    out
}

/// A step line of (x, y) samples in order, with a marker at `peak` (x, y).
pub fn step_line(
    id: &str,
    samples: &[(f64, f64)],
    peak: Option<(f64, f64)>,
    x_unit: &str,
    y_unit: &str,
) -> String {
    let plot_h = H - TOP - BOTTOM;
    let plot_w = W - LEFT - RIGHT;
    let mut out = String::new();
    open(&mut out, id, H, y_unit);
    let ymax = samples.iter().map(|s| s.1).fold(0.0, f64::max);
    let top = y_axis(&mut out, ymax, y_unit, plot_h);
    let (x0, x1) = (
        samples.first().map_or(0.0, |s| s.0),
        samples.last().map_or(1.0, |s| s.0),
    );
    let span = if x1 > x0 { x1 - x0 } else { 1.0 };
    let sx = |x: f64| LEFT + (x - x0) / span * plot_w;
    let sy = |y: f64| TOP + plot_h - y / top * plot_h;
    let xstep = nice_step(span, 8.0);
    let mut t = (x0 / xstep).ceil() * xstep;
    while t <= x1 {
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            sx(t),
            TOP + plot_h + 16.0,
            num(t)
        );
        t += xstep;
    }
    let mut d = String::new();
    let mut prev: Option<f64> = None;
    for &(x, y) in samples {
        match prev {
            None => {
                let _ = write!(d, "M{:.1} {:.1}", sx(x), sy(y));
            }
            Some(py) => {
                let _ = write!(d, "L{:.1} {:.1}L{:.1} {:.1}", sx(x), sy(py), sx(x), sy(y));
            }
        }
        prev = Some(y);
    }
    let _ = write!(
        out,
        r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.5"/>"#,
        PALETTE[0]
    );
    if let Some((px, py)) = peak {
        let _ = write!(
            out,
            r#"<line x1="{0:.1}" x2="{0:.1}" y1="{TOP}" y2="{1:.1}" stroke="{2}" stroke-dasharray="4 3"/><circle cx="{0:.1}" cy="{3:.1}" r="5" fill="{2}"><title>peak: {4} {5} at {6} {7}</title></circle><text x="{8:.1}" y="{9:.1}" fill="{2}">peak {4} {5}</text>"#,
            sx(px),
            TOP + plot_h,
            PALETTE[3],
            sy(py),
            num(py),
            esc(y_unit),
            num(px),
            esc(x_unit),
            sx(px) + 8.0,
            sy(py) - 8.0
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text></svg>"#,
        LEFT + plot_w / 2.0,
        TOP + plot_h + 36.0,
        esc(x_unit)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short_and_steps_nice() {
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(1500.0), "1500");
        assert_eq!(nice_step(97.0, 5.0), 20.0);
        assert_eq!(nice_step(0.9, 5.0), 0.2);
    }

    #[test]
    fn stacked_bars_draw_one_rect_per_nonzero_part_and_a_legend_of_used_series() {
        let s = stacked_bars(
            "c",
            &["a".into(), "b".into(), "never".into()],
            &[
                ("1".into(), vec![1.0, 2.0, 0.0]),
                ("2".into(), vec![0.0, 3.0, 0.0]),
            ],
            "ms",
            "step",
        );
        assert_eq!(s.matches("<rect").count(), 3 + 2);
        assert!(s.contains(">a<") && s.contains(">b<") && !s.contains("never"));
    }

    #[test]
    fn the_roofline_marks_custom_calls_and_draws_each_roof() {
        let s = roofline(
            "r",
            1000.0,
            &[Roof {
                name: "HBM".into(),
                bandwidth: 100.0,
            }],
            &[
                Point {
                    x: 1.0,
                    y: 50.0,
                    label: "fusion".into(),
                    marked: false,
                },
                Point {
                    x: 100.0,
                    y: 900.0,
                    label: "kernel".into(),
                    marked: true,
                },
            ],
        );
        assert_eq!(s.matches("<polyline").count(), 1);
        assert!(s.contains("ridge 10"));
        assert!(s.contains("(custom call)"));
    }
}
