//! `egrad explore --plot`: residual bytes (x) against run time (y; the
//! model's flops when not timed), drawn with plotters' SVG backend.
//!
//! Each axis is logarithmic when its values span a decade or more
//! (one outlier no longer squashes the rest into a corner), linear
//! otherwise; ticks are chosen here (decades on a log axis, steps of 1, 2
//! or 5 on a linear one) and labelled with SI prefixes. The Pareto front
//! is red and joined by a line; each distinct program is one point,
//! labelled with its λ values, labels placed by [`labels::place`]. The
//! same exploration always gives the same bytes.

use super::labels::{self, Placed, Rect};
use egrad::{Error, Exploration, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use std::ops::Range;

/// The plot's size in pixels.
pub const WIDTH: u32 = 760;
pub const HEIGHT: u32 = 500;
/// Point labels' font size, in pixels.
const FONT: f64 = 12.0;
/// Plotters writes a font of size `s` as `font-size` `s / 1.24` in SVG:
/// sizes given to it are these pixels times this.
const PLOTTERS_EM: f64 = 1.24;

/// A font of `px` pixels, as plotters takes it.
fn font(px: f64) -> (&'static str, f64) {
    ("sans-serif", px * PLOTTERS_EM)
}
/// A point's radius, in pixels.
const MARKER: u32 = 5;
/// An axis is logarithmic when its largest positive value is at least
/// this many times its smallest (a decade).
const LOG_RATIO: f64 = 10.0;
const FRONT: RGBColor = RGBColor(0xc3, 0x33, 0x33);
const DOMINATED: RGBColor = RGBColor(0x80, 0x80, 0x80);

/// One axis's scale, chosen from its values. Positions are in plotted
/// units: the value itself on a linear axis, its base-10 logarithm on a
/// log one.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub log: bool,
    /// The plotted range.
    pub lo: f64,
    pub hi: f64,
    /// Labelled ticks (plotted units), ascending.
    pub ticks: Vec<f64>,
    /// Unlabelled grid lines (a log axis's 2, 3, ..., 9 of each decade).
    pub minor: Vec<f64>,
    /// On a log axis with zeros among its values: where 0 is drawn (a
    /// decade below the smallest positive value's, its tick labelled 0).
    pub zero: Option<f64>,
}

impl Axis {
    /// The scale for `values` (finite, not negative).
    pub fn new(values: &[f64]) -> Axis {
        let pos: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
        let (min_pos, max) = (
            pos.iter().copied().fold(f64::INFINITY, f64::min),
            values.iter().copied().fold(0.0f64, f64::max),
        );
        if !pos.is_empty() && max / min_pos >= LOG_RATIO {
            Axis::log(values, min_pos, max)
        } else {
            Axis::linear(values)
        }
    }

    fn log(values: &[f64], min_pos: f64, max: f64) -> Axis {
        let a = min_pos.log10().floor();
        let mut b = max.log10().ceil();
        if b <= a {
            b = a + 1.0;
        }
        let zero = values.iter().any(|v| *v <= 0.0).then_some(a - 1.0);
        let first = zero.unwrap_or(a);
        let pad = 0.04 * (b - first);
        let decades = (b - a) as i32;
        let mut ticks: Vec<f64> = zero.into_iter().collect();
        let mut minor = Vec::new();
        for d in 0..=decades {
            let d = a + d as f64;
            ticks.push(d);
            if d < b {
                for m in 2..10 {
                    let t = d + (m as f64).log10();
                    // Label 2 and 5 too when there are few decades.
                    if decades <= 2 && (m == 2 || m == 5) {
                        ticks.push(t);
                    } else {
                        minor.push(t);
                    }
                }
            }
        }
        ticks.sort_by(f64::total_cmp);
        Axis {
            log: true,
            lo: first - pad,
            hi: b + pad,
            ticks,
            minor,
            zero,
        }
    }

    fn linear(values: &[f64]) -> Axis {
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if !lo.is_finite() {
            (0.0, 1.0)
        } else if hi > lo {
            (lo, hi)
        } else if lo == 0.0 {
            (0.0, 1.0)
        } else {
            (lo - 0.1 * lo.abs(), hi + 0.1 * hi.abs())
        };
        let step = nice_step((hi - lo) / 5.0);
        // Whole numbers (bytes, flops) get whole ticks, at least two: no
        // "0.2 B".
        let whole = values.iter().all(|v| v.fract() == 0.0) && step < 1.0;
        let (lo, hi, step) = if whole {
            (lo.floor(), hi.ceil().max(lo.floor() + 1.0), 1.0)
        } else {
            (lo, hi, step)
        };
        let pad = 0.06 * (hi - lo);
        let (lo, hi) = (lo - pad, hi + pad);
        let nonnegative = values.iter().all(|v| *v >= 0.0);
        let ticks = ((lo / step).ceil() as i64..=(hi / step).floor() as i64)
            .map(|k| k as f64 * step)
            .filter(|t| !nonnegative || *t >= 0.0)
            .collect();
        Axis {
            log: false,
            lo,
            hi,
            ticks,
            minor: Vec::new(),
            zero: None,
        }
    }

    /// Where `v` is drawn, in plotted units.
    pub fn pos(&self, v: f64) -> f64 {
        match (self.log, self.zero) {
            (false, _) => v,
            (true, Some(z)) if v <= 0.0 => z,
            (true, _) => v.log10(),
        }
    }

    /// A tick's label: on a linear axis with as many decimals as the
    /// ticks' spacing needs (0.035 and 0.04, not 0.04 twice).
    pub fn label(&self, t: f64) -> String {
        if self.zero == Some(t) {
            "0".into()
        } else if self.log {
            si(10f64.powf(t))
        } else {
            match self.ticks.as_slice() {
                [a, b, ..] => si_step(t, b - a),
                _ => si(t),
            }
        }
    }
}

/// An [`Axis`] as plotters' coordinate: linear in plotted units, its key
/// points the axis's ticks (bold) and minor grid lines (light).
struct Scale(Axis);

impl Ranged for Scale {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let t = (v - self.0.lo) / (self.0.hi - self.0.lo);
        limit.0 + ((limit.1 - limit.0) as f64 * t).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.0.minor.clone()
        } else {
            self.0.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.0.lo..self.0.hi
    }
}

/// 1, 2 or 5 times a power of ten, at least `x`.
fn nice_step(x: f64) -> f64 {
    let p = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= x * 0.999)
        .unwrap_or(10.0 * p)
}

/// A number with an SI prefix, three significant digits at most: 1, 2.5,
/// 800, 1k, 12.5k, 3M, 0.05.
pub fn si(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && a < 1e-3 {
        return format!("{v:.0e}");
    }
    let (scale, p) = prefix(a);
    let x = v / scale;
    decimals(x, digits(x)) + p
}

/// The SI prefix for numbers of magnitude `a`: its scale and letter.
fn prefix(a: f64) -> (f64, &'static str) {
    [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .iter()
        .find(|(s, _)| a >= s * 0.9995)
        .map_or((1.0, ""), |(s, p)| (*s, *p))
}

/// The decimals of three significant digits at most for `x` (already
/// scaled by its prefix).
fn digits(x: f64) -> usize {
    if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    }
}

/// `x` with `digits` decimals, trailing zeros and a negative zero dropped.
fn decimals(x: f64, digits: usize) -> String {
    let mut s = format!("{x:.digits$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// `v` with [`si`]'s prefix and at least the decimals that tell apart
/// numbers `step` apart (ticks of that spacing).
fn si_step(v: f64, step: f64) -> String {
    let a = v.abs().max(step.abs());
    let (scale, p) = prefix(a);
    if a < 1e-3 || (v != 0.0 && v.abs() < 1e-3) || prefix(v.abs()).1 != p {
        return si(v);
    }
    let x = v / scale;
    let needed = (-(step / scale).log10().floor()).clamp(0.0, 9.0) as usize;
    decimals(x, needed.max(digits(x))) + p
}

/// One distinct program on the plot.
#[derive(Clone, Debug)]
pub struct Mark {
    /// Its point in the exploration (the first λ that chose it).
    pub index: usize,
    /// Every point (λ) that chose this program, in order.
    pub lambdas: Vec<usize>,
    /// Its centre in pixels.
    pub x: f64,
    pub y: f64,
    /// "λ=4" (or "λ=4, 16" for a program two λ values chose).
    pub label: String,
    /// Where its label went (None: no room).
    pub placed: Option<Placed>,
}

/// The plot and where its parts are.
#[derive(Clone, Debug)]
pub struct Drawn {
    pub svg: String,
    /// The plot area, in pixels.
    pub area: Rect,
    pub marks: Vec<Mark>,
    pub x: Axis,
    pub y: Axis,
}

/// The y value a point is drawn at: its run time in µs, else the model's
/// flops when not every distinct program was timed.
fn y_value(p: &egrad::Point, timed: bool) -> f64 {
    match p.time {
        Some(t) if timed => t.as_secs_f64() * 1e6,
        _ => p.flops,
    }
}

fn plot_error(e: impl std::fmt::Debug) -> Error {
    Error::internal(format!("drawing the plot: {e:?}"))
}

/// The plot of `e`.
pub fn draw(e: &Exploration) -> Result<Drawn> {
    let distinct: Vec<usize> = (0..e.points.len())
        .filter(|&i| e.points[i].same_as.is_none())
        .collect();
    let timed = distinct.iter().all(|&i| e.points[i].time.is_some());
    let xs: Vec<f64> = distinct
        .iter()
        .map(|&i| e.points[i].residual_bytes)
        .collect();
    let ys: Vec<f64> = distinct
        .iter()
        .map(|&i| y_value(&e.points[i], timed))
        .collect();
    let (xa, ya) = (Axis::new(&xs), Axis::new(&ys));
    let scale = |a: &Axis| if a.log { ", log scale" } else { "" };
    let x_title = format!("residual bytes stored (B{})", scale(&xa));
    let y_title = if timed {
        format!("run time per call (µs{})", scale(&ya))
    } else {
        format!("model cost (flops{}; not timed)", scale(&ya))
    };
    let sizes: Vec<String> = e.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let title = format!(
        "store or recompute: {}{}",
        e.function,
        if sizes.is_empty() {
            String::new()
        } else {
            format!(" at {}", sizes.join(", "))
        }
    );
    let mut svg = String::new();
    let (area, marks) = {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let body = root.titled(&title, font(16.0)).map_err(plot_error)?;
        let (legend, rest) = body.split_vertically(26);
        draw_legend(&legend)?;
        let mut chart = ChartBuilder::on(&rest)
            .margin_left(8)
            .margin_right(24)
            .margin_bottom(6)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(Scale(xa.clone()), Scale(ya.clone()))
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc(x_title)
            .y_desc(y_title)
            .x_label_formatter(&|v| xa.label(*v))
            .y_label_formatter(&|v| ya.label(*v))
            .label_style(font(12.0))
            .axis_desc_style(font(13.0))
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(BLACK.mix(0.04))
            .draw()
            .map_err(plot_error)?;
        let (px, py) = chart.plotting_area().get_pixel_range();
        let area = Rect {
            x0: px.start as f64,
            y0: py.start as f64,
            x1: px.end as f64,
            y1: py.end as f64,
        };
        let at = |k: usize| (xa.pos(xs[k]), ya.pos(ys[k]));
        // The front, joined from fewest bytes to most.
        let mut front: Vec<usize> = (0..distinct.len())
            .filter(|&k| e.points[distinct[k]].pareto)
            .collect();
        front.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]).then(ys[a].total_cmp(&ys[b])));
        if front.len() > 1 {
            let path: Vec<(f64, f64)> = front.iter().map(|&k| at(k)).collect();
            chart
                .draw_series(std::iter::once(PathElement::new(
                    path,
                    FRONT.stroke_width(2),
                )))
                .map_err(plot_error)?;
        }
        chart
            .draw_series((0..distinct.len()).map(|k| {
                let color = if e.points[distinct[k]].pareto {
                    FRONT
                } else {
                    DOMINATED
                };
                Circle::new(at(k), MARKER, color.filled())
            }))
            .map_err(plot_error)?;
        let mut marks: Vec<Mark> = (0..distinct.len())
            .map(|k| {
                let (x, y) = chart.backend_coord(&at(k));
                let i = distinct[k];
                let lambdas: Vec<usize> = (0..e.points.len())
                    .filter(|&j| j == i || e.points[j].same_as == Some(i))
                    .collect();
                let ls: Vec<String> = lambdas
                    .iter()
                    .map(|&j| e.points[j].lambda.to_string())
                    .collect();
                Mark {
                    index: i,
                    lambdas,
                    x: x as f64,
                    y: y as f64,
                    label: format!("λ={}", ls.join(", ")),
                    placed: None,
                }
            })
            .collect();
        place_labels(&mut marks, &e.points, area);
        for m in &marks {
            draw_label(&root, m)?;
        }
        root.present().map_err(plot_error)?;
        (area, marks)
    };
    Ok(Drawn {
        svg,
        area,
        marks,
        x: xa,
        y: ya,
    })
}

/// Place the marks' labels: the front's first, then the others, each in
/// the exploration's order.
fn place_labels(marks: &mut [Mark], points: &[egrad::Point], area: Rect) {
    let mut order: Vec<usize> = (0..marks.len()).collect();
    order.sort_by_key(|&k| !points[marks[k].index].pareto);
    let centres: Vec<(f64, f64)> = order.iter().map(|&k| (marks[k].x, marks[k].y)).collect();
    let sizes: Vec<(f64, f64)> = order
        .iter()
        .map(|&k| labels::text_size(&marks[k].label, FONT))
        .collect();
    let inner = Rect {
        x0: area.x0 + 2.0,
        y0: area.y0 + 2.0,
        x1: area.x1 - 2.0,
        y1: area.y1 - 2.0,
    };
    let placed = labels::place(&centres, &sizes, inner, MARKER as f64);
    for (k, p) in order.into_iter().zip(placed) {
        marks[k].placed = p;
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_label(root: &Area, m: &Mark) -> Result<()> {
    let Some(p) = m.placed else {
        return Ok(());
    };
    if p.leader {
        let (ex, ey) = labels::leader_end(&p.rect, m.x, m.y);
        let line = vec![(m.x as i32, m.y as i32), (ex as i32, ey as i32)];
        root.draw(&PathElement::new(line, BLACK.mix(0.45)))
            .map_err(plot_error)?;
    }
    let top = p.rect.y0 + labels::TEXT_RISE * FONT;
    root.draw(&Text::new(
        m.label.clone(),
        ((p.rect.x0 + 1.0) as i32, top.round() as i32),
        font(FONT),
    ))
    .map_err(plot_error)
}

/// The legend, in the row between the title and the plot.
fn draw_legend(area: &Area) -> Result<()> {
    let font = font(12.0);
    let y = 12;
    let mut x = 80;
    area.draw(&PathElement::new(
        vec![(x - 12, y), (x + 12, y)],
        FRONT.stroke_width(2),
    ))
    .map_err(plot_error)?;
    area.draw(&Circle::new((x, y), MARKER, FRONT.filled()))
        .map_err(plot_error)?;
    let front = "Pareto front (no other program stores fewer bytes and runs faster)";
    area.draw(&Text::new(front, (x + 18, y - 8), font))
        .map_err(plot_error)?;
    x += 500;
    area.draw(&Circle::new((x, y), MARKER, DOMINATED.filled()))
        .map_err(plot_error)?;
    area.draw(&Text::new("dominated", (x + 10, y - 8), font))
        .map_err(plot_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn point(lambda: f64, bytes: f64, us: Option<f64>, flops: f64) -> egrad::Point {
        egrad::Point {
            lambda,
            flops,
            residual_bytes: bytes,
            stored: 0,
            recomputed: 0,
            choices: Vec::new(),
            time: us.map(|u| Duration::from_secs_f64(u * 1e-6)),
            buffer_bytes: None,
            same_as: None,
            pareto: false,
            outputs: Vec::new(),
        }
    }

    /// The text of every `<text>` element, trimmed.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text ")
            .skip(1)
            .map(|t| {
                let body = &t[t.find('>').unwrap() + 1..];
                body[..body.find("</text>").unwrap()].trim().to_string()
            })
            .collect()
    }

    fn exploration(points: Vec<egrad::Point>) -> Exploration {
        Exploration {
            function: "df".into(),
            dims: vec![("N".into(), 1000)],
            points,
            limits: Vec::new(),
        }
    }

    #[test]
    fn an_axis_spanning_decades_is_logarithmic() {
        // Bytes from 80 to 8 MB, and a zero: log, 0 a decade below 10.
        let a = Axis::new(&[8e6, 8000.0, 80.0, 0.0, 16000.0]);
        assert!(a.log);
        assert_eq!(a.zero, Some(0.0));
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        assert_eq!(labels, ["0", "10", "100", "1k", "10k", "100k", "1M", "10M"]);
        assert_eq!(a.pos(0.0), 0.0);
        assert!((a.pos(8000.0) - 8000f64.log10()).abs() < 1e-12);
        assert!(a.lo < 0.0 && a.hi > 7.0);
        // One outlier past a decade: 28 to 493 µs, labelled at 1, 2, 5.
        let t = Axis::new(&[27.9, 40.6, 42.3, 493.2]);
        let labels: Vec<String> = t.ticks.iter().map(|v| t.label(*v)).collect();
        assert_eq!(labels, ["10", "20", "50", "100", "200", "500", "1k"]);
        // One decade: linear, ticks of 1, 2 or 5.
        let b = Axis::new(&[12.0, 30.0, 95.0]);
        assert!(!b.log && b.zero.is_none());
        let labels: Vec<String> = b.ticks.iter().map(|t| b.label(*t)).collect();
        assert_eq!(labels, ["20", "40", "60", "80"]);
        assert!(b.lo < 12.0 && b.hi > 95.0);
    }

    #[test]
    fn ticks_ascend_and_cover_the_values() {
        for values in [
            &[0.0, 1.0][..],
            &[5.0, 5.0],
            &[0.0],
            &[3.2e-3, 7.5e-3, 1.1e-2],
            &[1.0, 1e9],
            &[0.5, 0.5, 70.0],
        ] {
            let a = Axis::new(values);
            assert!(a.ticks.len() >= 2, "{values:?}: {a:?}");
            assert!(a.ticks.windows(2).all(|w| w[0] < w[1]), "{a:?}");
            for v in values {
                let p = a.pos(*v);
                assert!(a.lo < p && p < a.hi, "{v} outside {a:?}");
            }
        }
    }

    /// Neighbouring ticks never share a label, however narrow the range.
    #[test]
    fn tick_labels_tell_neighbours_apart() {
        for values in [
            &[0.0351, 0.0352][..],
            &[0.035][..],
            &[1001.0, 1002.0][..],
            &[12_345.0, 12_346.0][..],
            &[2.5e6, 2.5001e6][..],
            &[0.0, 1.0][..],
        ] {
            let a = Axis::new(values);
            let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
            assert!(
                labels.windows(2).all(|w| w[0] != w[1]),
                "{values:?}: {labels:?}"
            );
        }
        // Whole numbers (bytes) have whole ticks.
        for values in [&[0.0][..], &[3.0, 4.0][..], &[0.0, 2.0][..]] {
            let a = Axis::new(values);
            assert!(
                a.ticks.iter().all(|t| t.fract() == 0.0),
                "{values:?}: {a:?}"
            );
        }
    }

    #[test]
    fn si_labels() {
        let got: Vec<String> = [0.0, 1.0, 2.5, 800.0, 1000.0, 12500.0, 3e6, 0.05, 1e-4, 1e10]
            .iter()
            .map(|v| si(*v))
            .collect();
        assert_eq!(
            got,
            ["0", "1", "2.5", "800", "1k", "12.5k", "3M", "0.05", "1e-4", "10G"]
        );
    }

    /// An outlier in bytes and time: both axes log, ticks and legend
    /// drawn, every point inside the plot area, the same bytes each time.
    #[test]
    fn the_svg_has_log_axes_ticks_a_legend_and_is_deterministic() {
        let mut ps = vec![
            point(0.0, 8e6, Some(2.0), 1e3),
            point(0.25, 16000.0, Some(3.0), 2e3),
            point(4.0, 8000.0, Some(5.0), 3e3),
            point(16.0, 0.0, Some(900.0), 4e6),
            point(1e6, 0.0, Some(900.0), 4e6),
            point(0.5, 9e6, Some(40.0), 1e4),
        ];
        ps[4].same_as = Some(3);
        for p in &mut ps[..4] {
            p.pareto = true;
        }
        let e = exploration(ps);
        let d = draw(&e).unwrap();
        assert!(d.svg.starts_with("<svg") && d.svg.trim_end().ends_with("</svg>"));
        assert!(d.x.log && d.y.log, "{:?} {:?}", d.x, d.y);
        let texts = texts(&d.svg);
        for tick in ["0", "1k", "10k", "1M", "10", "100"] {
            assert!(texts.iter().any(|t| t == tick), "no tick {tick}: {texts:?}");
        }
        assert!(d.svg.contains("residual bytes stored (B, log scale)"));
        assert!(d.svg.contains("run time per call (µs, log scale)"));
        assert!(texts.iter().any(|t| t.starts_with("Pareto front")));
        assert!(texts.iter().any(|t| t == "dominated"));
        // Five distinct programs; λ = 16 and 1e6 share one point.
        assert_eq!(d.marks.len(), 5);
        assert!(texts.iter().any(|t| t == "λ=16, 1000000"), "{texts:?}");
        for m in &d.marks {
            assert!(d.area.x0 < m.x && m.x < d.area.x1, "{m:?}");
            assert!(d.area.y0 < m.y && m.y < d.area.y1, "{m:?}");
            let p = m.placed.expect("room for five labels");
            assert!(p.rect.inside(&d.area), "{m:?}");
        }
        // Faster is lower: 2 µs is below 900 µs.
        assert!(d.marks[0].y > d.marks[3].y);
        assert_eq!(draw(&e).unwrap().svg, d.svg);
    }

    #[test]
    fn untimed_points_plot_the_model_s_flops_on_linear_axes() {
        let mut ps = vec![
            point(0.0, 800.0, None, 1000.0),
            point(1.0, 400.0, None, 1500.0),
        ];
        ps[0].pareto = true;
        ps[1].pareto = true;
        let d = draw(&exploration(ps)).unwrap();
        assert!(!d.x.log && !d.y.log);
        assert!(d.svg.contains("model cost (flops; not timed)"), "{}", d.svg);
        assert!(d.svg.contains("residual bytes stored (B)"));
    }
}
