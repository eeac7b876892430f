//! Where each point's label goes on a plot, so that no two labels'
//! boxes overlap, no label covers a point, and every label stays inside
//! the plot area (`explore --plot`, `--html`).
//!
//! An SVG writer cannot measure text, so a label's box is estimated from
//! wide glyph widths (DejaVu Sans's, the widest common sans-serif: a
//! browser's real box is no larger). Each label tries offsets around its
//! point, nearest first; one placed away from its point gets a leader
//! line; one that fits nowhere is left out (the point keeps its tooltip
//! and its row in the table).

/// An axis-aligned box in pixels, `y` downwards.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

impl Rect {
    /// The box `w` by `h` whose top left corner is `(x, y)`.
    pub fn at(x: f64, y: f64, w: f64, h: f64) -> Rect {
        Rect {
            x0: x,
            y0: y,
            x1: x + w,
            y1: y + h,
        }
    }

    /// Do the two boxes share more than an edge?
    pub fn overlaps(&self, o: &Rect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    /// Is this box wholly inside `o`?
    pub fn inside(&self, o: &Rect) -> bool {
        self.x0 >= o.x0 && self.x1 <= o.x1 && self.y0 >= o.y0 && self.y1 <= o.y1
    }
}

/// How far above its top a text's drawn box reaches, in font sizes, when
/// the text is written with its top at `y` (plotters' `dy="0.76em"`: the
/// font's ascent reaches above the baseline further than 0.76 em).
pub const TEXT_RISE: f64 = 0.2;

/// The box of `text` at `font` pixels: estimated widths of wide glyphs
/// (DejaVu Sans's advances, rounded up), the height of the font's ascent
/// and descent.
pub fn text_size(text: &str, font: f64) -> (f64, f64) {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            '0'..='9' | '.' | 'λ' | 'e' | 'k' => 0.65,
            '=' | '+' | '-' | '×' => 0.85,
            ',' | ' ' => 0.35,
            'M' | 'W' | 'm' | 'w' => 1.0,
            _ => 0.75,
        })
        .sum();
    (em * font + 2.0, 1.3 * font)
}

/// A label's place: its box, and whether it is far enough from its point
/// to need a leader line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placed {
    pub rect: Rect,
    pub leader: bool,
}

/// The offsets tried, in order: the four corners, then the four sides,
/// at each distance in turn.
const DIRECTIONS: [(f64, f64); 8] = [
    (1.0, -1.0),
    (1.0, 1.0),
    (-1.0, -1.0),
    (-1.0, 1.0),
    (1.0, 0.0),
    (-1.0, 0.0),
    (0.0, -1.0),
    (0.0, 1.0),
];

/// Gaps between a point and its label tried, in pixels; past the first a
/// leader line joins them.
const GAPS: [f64; 5] = [3.0, 14.0, 28.0, 48.0, 72.0];

/// Place the label of size `sizes[i]` of each point `points[i]` (pixels)
/// inside `area`, avoiding every point's marker (radius `marker`) and the
/// labels placed before it, points in the order given. None: no room.
pub fn place(
    points: &[(f64, f64)],
    sizes: &[(f64, f64)],
    area: Rect,
    marker: f64,
) -> Vec<Option<Placed>> {
    let r = marker + 1.0;
    let mut taken: Vec<Rect> = points
        .iter()
        .map(|&(x, y)| Rect::at(x - r, y - r, 2.0 * r, 2.0 * r))
        .collect();
    let mut out = Vec::with_capacity(points.len());
    for (&(x, y), &(w, h)) in points.iter().zip(sizes) {
        let found = GAPS.iter().enumerate().find_map(|(ring, &gap)| {
            DIRECTIONS.iter().find_map(|&(dx, dy)| {
                let d = r + gap;
                // The box's corner (or side's middle) nearest the point sits
                // `d` from it along the direction.
                let left = match dx {
                    d_ if d_ > 0.0 => x + d,
                    d_ if d_ < 0.0 => x - d - w,
                    _ => x - w / 2.0,
                };
                let top = match dy {
                    d_ if d_ > 0.0 => y + d,
                    d_ if d_ < 0.0 => y - d - h,
                    _ => y - h / 2.0,
                };
                let rect = Rect::at(left, top, w, h);
                let free = rect.inside(&area) && !taken.iter().any(|t| t.overlaps(&rect));
                free.then_some(Placed {
                    rect,
                    leader: ring > 0,
                })
            })
        });
        if let Some(p) = found {
            taken.push(p.rect);
        }
        out.push(found);
    }
    out
}

/// Where a leader line from the point `(x, y)` meets the label's box: the
/// box's nearest point.
pub fn leader_end(rect: &Rect, x: f64, y: f64) -> (f64, f64) {
    (x.clamp(rect.x0, rect.x1), y.clamp(rect.y0, rect.y1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const AREA: Rect = Rect {
        x0: 0.0,
        y0: 0.0,
        x1: 400.0,
        y1: 300.0,
    };

    fn check(points: &[(f64, f64)], placed: &[Option<Placed>], marker: f64) {
        let rects: Vec<Rect> = placed.iter().flatten().map(|p| p.rect).collect();
        for (i, a) in rects.iter().enumerate() {
            assert!(a.inside(&AREA), "{a:?}");
            for b in &rects[i + 1..] {
                assert!(!a.overlaps(b), "{a:?} and {b:?}");
            }
            for &(x, y) in points {
                let dot = Rect::at(x - marker, y - marker, 2.0 * marker, 2.0 * marker);
                assert!(!a.overlaps(&dot), "{a:?} covers the point ({x}, {y})");
            }
        }
    }

    #[test]
    fn a_lone_point_s_label_sits_beside_it_without_a_leader() {
        let size = text_size("λ=4", 12.0);
        let placed = place(&[(100.0, 100.0)], &[size], AREA, 4.0);
        let p = placed[0].unwrap();
        assert!(!p.leader);
        // Up and to the right, close by.
        assert!(p.rect.x0 > 100.0 && p.rect.x0 < 110.0, "{p:?}");
        assert!(p.rect.y1 < 100.0 && p.rect.y1 > 90.0, "{p:?}");
    }

    /// The case: "λ=4" and "λ=16" at nearly the same place read
    /// as "λ=164" when both labels go to the upper right.
    #[test]
    fn close_points_labels_do_not_collide() {
        let points = [(200.0, 150.0), (206.0, 152.0)];
        let sizes = [text_size("λ=4", 12.0), text_size("λ=16", 12.0)];
        let placed = place(&points, &sizes, AREA, 4.0);
        assert!(placed.iter().all(Option::is_some), "{placed:?}");
        check(&points, &placed, 4.0);
    }

    #[test]
    fn a_label_at_the_area_s_edge_turns_inwards() {
        let size = text_size("λ=1000000", 12.0);
        let placed = place(&[(395.0, 5.0)], &[size], AREA, 4.0);
        let p = placed[0].unwrap();
        assert!(
            p.rect.inside(&AREA) && p.rect.x1 < 395.0 && p.rect.y0 > 5.0,
            "{p:?}"
        );
    }

    #[test]
    fn a_crowd_gets_leaders_or_no_label_but_never_overlaps() {
        // 40 points on a small grid: some labels must go far or nowhere.
        let points: Vec<(f64, f64)> = (0..40)
            .map(|i| (150.0 + 9.0 * (i % 8) as f64, 120.0 + 9.0 * (i / 8) as f64))
            .collect();
        let sizes: Vec<(f64, f64)> = (0..40)
            .map(|i| text_size(&format!("λ={i}"), 12.0))
            .collect();
        let placed = place(&points, &sizes, AREA, 4.0);
        check(&points, &placed, 4.0);
        assert!(placed.iter().any(|p| p.is_some_and(|p| p.leader)));
        assert!(placed.iter().any(Option::is_none));
        // The same input, the same places.
        assert_eq!(placed, place(&points, &sizes, AREA, 4.0));
    }

    #[test]
    fn leaders_end_on_the_box() {
        let r = Rect::at(10.0, 10.0, 20.0, 10.0);
        assert_eq!(leader_end(&r, 0.0, 0.0), (10.0, 10.0));
        assert_eq!(leader_end(&r, 50.0, 15.0), (30.0, 15.0));
    }

    #[test]
    fn wider_text_is_wider() {
        let (a, h) = text_size("λ=4", 12.0);
        let (b, _) = text_size("λ=16", 12.0);
        assert!(b > a && h > 12.0);
        // Each glyph's estimate is no narrower than DejaVu Sans's advance
        // (digits 0.636 em, "=" 0.838 em).
        assert!(text_size("00", 10.0).0 >= 2.0 * 6.36);
        assert!(text_size("=", 10.0).0 >= 8.38);
    }
}
