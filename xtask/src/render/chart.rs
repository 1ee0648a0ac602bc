//! `docs/bandwidth.svg`: GB/s against transfer size, one panel per direction.

use plotters::prelude::*;

use super::record::Record;
use super::tables::Table;
use crate::{human_bytes, Result};

fn column_color(column: &str, index: usize) -> RGBColor {
    match column {
        "pageable" => RGBColor(120, 120, 120),
        "pageable-async" => RGBColor(40, 40, 40),
        "copy-in" => RGBColor(31, 119, 180),
        "resident" => RGBColor(214, 39, 40),
        "raw-pinned" => RGBColor(255, 127, 14),
        "cudarc-pinned" => RGBColor(44, 160, 44),
        "cudarc-pageable" => RGBColor(152, 223, 138),
        "copy-in-registered" => RGBColor(148, 103, 189),
        _ => {
            let (r, g, b) = Palette99::pick(index).rgb();
            RGBColor(r, g, b)
        }
    }
}

/// `docs/bandwidth.svg`: GB/s against size (log2), one panel per direction.
pub fn svg(records: &[Record]) -> Result<String> {
    let t = Table::new(records);
    let mut out = String::new();
    {
        let panels = t.directions.len().max(1);
        let root =
            SVGBackend::with_string(&mut out, (1000, 520 * panels as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        for (area, dir) in root.split_evenly((panels, 1)).iter().zip(&t.directions) {
            draw_panel(area, &t, dir)?;
        }
        root.present()?;
    }
    Ok(out)
}

fn draw_panel(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    t: &Table,
    dir: &str,
) -> Result<()> {
    let sizes = t.sizes(dir);
    let (Some(&first), Some(&last)) = (sizes.first(), sizes.last()) else {
        return Ok(());
    };
    let (x0, x1) = (first as f64 / 1.5, last as f64 * 1.5);
    let y_max = t
        .columns
        .iter()
        .flat_map(|c| sizes.iter().filter_map(move |&n| t.get(dir, n, c)))
        .map(Record::gbps)
        .fold(0.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{dir} bandwidth (GB/s = bytes / median time)"),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((x0..x1).log_scale().base(2.0), 0.0..y_max.max(1.0))?;
    chart
        .configure_mesh()
        .x_desc("transfer size")
        .y_desc("GB/s")
        .x_label_formatter(&|v| human_bytes(v.round() as u64))
        .draw()?;
    for (i, column) in t.sweep_columns().into_iter().enumerate() {
        let points: Vec<(f64, f64)> = sizes
            .iter()
            .filter_map(|&n| t.get(dir, n, column))
            .map(|r| (r.bytes as f64, r.gbps()))
            .collect();
        if points.is_empty() {
            continue;
        }
        let color = column_color(column, i);
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(column.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::fake_back_to_back;
    use super::*;

    #[test]
    fn draws_one_panel_per_direction() {
        let svg = svg(&fake_back_to_back()).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("H2D bandwidth"));
        assert!(svg.contains("D2H bandwidth"));
        assert!(svg.contains("resident"));
    }
}
