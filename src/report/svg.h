/* Charts as inline SVG for the report: a frame with a step axis and a linear or log10 value
 * axis (ticks, grid, labels), and polylines drawn at the screen's resolution.
 *
 * Downsampling is for the picture only. dt_svg_line keeps, per pixel column, the first, the
 * lowest, the highest and the last point it was given (in step order), so a line over 100k
 * steps is at most four points a column and still shows every spike; the verdicts never see
 * these pixels. */
#ifndef DT_REPORT_SVG_H
#define DT_REPORT_SVG_H

#include <stdio.h>

typedef struct dt_chart {
    FILE *f;
    double left, top, width, height; /* the plot frame, SVG pixels */
    double map_top, map_bottom;      /* pixel rows of y1 and y0 (inside the frame) */
    double x0, x1;                   /* steps at the frame's left and right edges */
    double y0, y1;                   /* value range (log10 of it when ylog) */
    int ylog;
    int yint;                        /* integer values: ticks at whole numbers (set before
                                        dt_chart_range) */
} dt_chart;

/* Opens an <svg> of w x h pixels with a title line; the frame leaves room for the axes.
 * `cls` is the svg's class attribute (for the page's CSS and tests). */
void dt_chart_open(dt_chart *c, FILE *f, int w, int h, const char *title, const char *cls);
/* Sets the ranges. Linear: y0 < y1 values (padded here by 5%; equal ends are widened).
 * Log: y0, y1 are the smallest and largest positive values, widened to whole decades. */
void dt_chart_range(dt_chart *c, double x0, double x1, double y0, double y1, int ylog);
/* Draws the frame, grid, ticks and tick labels of both axes, and the x axis label. */
void dt_chart_axes(const dt_chart *c, const char *xlabel);
double dt_chart_px(const dt_chart *c, double step);
/* Pixel row of value v (log: v > 0), clamped to the frame. */
double dt_chart_py(const dt_chart *c, double v);
void dt_chart_close(dt_chart *c);

typedef struct dt_svg_line {
    FILE *f;
    long col;                  /* pixel column of the pending points; LONG_MIN: none */
    int n;                     /* points given in that column */
    double fx, fy, lx, ly;     /* its first and last */
    double ax, ay, bx, by;     /* its lowest and highest row */
    int pen_up;                /* the next point starts a new subpath */
} dt_svg_line;

/* Starts a <path> with the given attributes (stroke, class, ...; not d). */
void dt_svg_line_begin(dt_svg_line *l, FILE *f, const char *attrs);
/* Adds a point (pixels); x must not decrease. */
void dt_svg_line_to(dt_svg_line *l, double x, double y);
/* Leaves a gap: the next point is not joined to the previous one. */
void dt_svg_line_gap(dt_svg_line *l);
void dt_svg_line_end(dt_svg_line *l);

/* Text at (x, y) with an anchor ("start", "middle", "end") and a class; escaped. */
void dt_svg_text(FILE *f, double x, double y, const char *anchor, const char *cls, const char *text);

#endif
