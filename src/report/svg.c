/* SVG charts of the report (see svg.h). */
#include "report/svg.h"

#include "report/html.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { MARGIN_LEFT = 66, MARGIN_RIGHT = 14, MARGIN_TOP = 28, MARGIN_BOTTOM = 34 };

void dt_chart_open(dt_chart *c, FILE *f, int w, int h, const char *title, const char *cls) {
    c->f = f;
    c->left = MARGIN_LEFT;
    c->top = MARGIN_TOP;
    c->width = w - MARGIN_LEFT - MARGIN_RIGHT;
    c->height = h - MARGIN_TOP - MARGIN_BOTTOM;
    c->map_top = c->top + 4;
    c->map_bottom = c->top + c->height - 4;
    c->x0 = 0;
    c->x1 = 1;
    c->y0 = 0;
    c->y1 = 1;
    c->ylog = 0;
    c->yint = 0;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"");
    dt_html_esc(f, cls);
    fprintf(f, "\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", w, h, w, h);
    dt_svg_text(f, c->left, 17, "start", "title", title);
}

void dt_chart_range(dt_chart *c, double x0, double x1, double y0, double y1, int ylog) {
    if (!(x1 > x0)) { x0 -= 0.5; x1 += 0.5; }
    c->x0 = x0;
    c->x1 = x1;
    c->ylog = ylog;
    if (ylog) {
        y0 = floor(log10(y0));
        y1 = ceil(log10(y1));
        if (y1 <= y0) y1 = y0 + 1;
    } else if (c->yint && y1 - y0 < 4) {
        y0 -= 1;
        y1 += 1;
    } else if (y1 > y0) {
        double pad = (y1 - y0) * 0.05;
        y0 -= pad;
        y1 += pad;
    } else {
        double pad = y0 != 0 ? fabs(y0) * 1e-3 : 1.0;
        y0 -= pad;
        y1 += pad;
    }
    c->y0 = y0;
    c->y1 = y1;
}

double dt_chart_px(const dt_chart *c, double step) {
    return c->left + (step - c->x0) / (c->x1 - c->x0) * c->width;
}

double dt_chart_py(const dt_chart *c, double v) {
    double t = ((c->ylog ? log10(v) : v) - c->y0) / (c->y1 - c->y0);
    double y = c->map_bottom - t * (c->map_bottom - c->map_top);
    if (!(y >= c->top)) y = c->top; /* NaN lands on the top edge too */
    if (y > c->top + c->height) y = c->top + c->height;
    return y;
}

/* A round tick spacing giving about `target` ticks over `range`. */
static double nice_step(double range, int target) {
    double raw = range / target, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void tick_label_x(char *buf, size_t n, double v) {
    if (fabs(v) >= 10000 && fmod(v, 1000) == 0) snprintf(buf, n, "%.0fk", v / 1000);
    else snprintf(buf, n, "%.0f", v);
}

static void tick_label_y(char *buf, size_t n, double v, double step) {
    int dec = (int)ceil(-log10(step) - 1e-9);
    if (dec < 0) dec = 0;
    if (fabs(v) < 0.5 * step) v = 0; /* no "-0.000" */
    if (dec > 9 || fabs(v) >= 1e7) snprintf(buf, n, "%.4g", v);
    else snprintf(buf, n, "%.*f", dec, v);
}

void dt_chart_axes(const dt_chart *c, const char *xlabel) {
    FILE *f = c->f;
    double bottom = c->top + c->height, right = c->left + c->width;
    fprintf(f, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
            c->left, c->top, c->width, c->height);
    char lab[64];
    double xs = nice_step(c->x1 - c->x0, 6);
    if (xs < 1) xs = 1;
    for (double v = ceil(c->x0 / xs) * xs; v <= c->x1 + 1e-9; v += xs) {
        double x = dt_chart_px(c, v);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x, c->top, x, bottom);
        tick_label_x(lab, sizeof lab, v);
        dt_svg_text(f, x, bottom + 14, "middle", "tick", lab);
    }
    if (c->ylog) {
        int d0 = (int)c->y0, d1 = (int)c->y1, every = (d1 - d0 + 7) / 8;
        if (every < 1) every = 1;
        for (int d = d0; d <= d1; d++) {
            if ((d - d0) % every) continue;
            double y = dt_chart_py(c, pow(10, d));
            fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", c->left, y, right, y);
            snprintf(lab, sizeof lab, "1e%d", d);
            dt_svg_text(f, c->left - 5, y + 4, "end", "tick", lab);
        }
    } else {
        double ys = nice_step(c->y1 - c->y0, 5);
        if (c->yint && ys < 1) ys = 1;
        double first = ceil(c->y0 / ys) * ys, base = 0;
        /* A narrow range far from zero (two runs' eval losses a few ulps apart) would need
         * labels wider than the margin: label the offsets from the first tick instead, and
         * write that tick's value once above the frame. */
        tick_label_y(lab, sizeof lab, fabs(c->y0) > fabs(c->y1) ? c->y0 : c->y1, ys);
        if (strlen(lab) > 8) {
            base = first;
            char b[80];
            snprintf(b, sizeof b, "axis: offset from %.*g", 15, base);
            dt_svg_text(f, right, c->top - 6, "end", "tick", b);
        }
        for (double v = first; v <= c->y1 + 1e-12 * fabs(c->y1); v += ys) {
            double y = dt_chart_py(c, v);
            fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", c->left, y, right, y);
            if (base != 0) snprintf(lab, sizeof lab, "%+.3g", v - base);
            else tick_label_y(lab, sizeof lab, v, ys);
            dt_svg_text(f, c->left - 5, y + 4, "end", "tick", lab);
        }
    }
    fputc('\n', f);
    if (xlabel) dt_svg_text(f, right, bottom + 29, "end", "axis", xlabel);
}

void dt_chart_close(dt_chart *c) { fputs("</svg>\n", c->f); }

/* ---- lines ---- */

void dt_svg_line_begin(dt_svg_line *l, FILE *f, const char *attrs) {
    l->f = f;
    l->col = LONG_MIN;
    l->n = 0;
    l->pen_up = 1;
    fprintf(f, "<path %s d=\"", attrs);
}

static void emit(dt_svg_line *l, double x, double y) {
    fprintf(l->f, "%c%.1f %.1f", l->pen_up ? 'M' : 'L', x, y);
    l->pen_up = 0;
}

/* Writes the pending column: first, then its lowest and highest rows in step order, then
 * last, skipping repeats. */
static void flush(dt_svg_line *l) {
    if (l->n == 0) return;
    double px[4] = {l->fx, l->ax, l->bx, l->lx}, py[4] = {l->fy, l->ay, l->by, l->ly};
    if (l->bx < l->ax) { px[1] = l->bx; py[1] = l->by; px[2] = l->ax; py[2] = l->ay; }
    for (int i = 0; i < 4; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= px[j] == px[i] && py[j] == py[i];
        if (!seen) emit(l, px[i], py[i]);
    }
    l->n = 0;
}

void dt_svg_line_to(dt_svg_line *l, double x, double y) {
    long col = (long)floor(x);
    if (col != l->col) {
        flush(l);
        l->col = col;
    }
    if (l->n == 0) {
        l->fx = l->ax = l->bx = x;
        l->fy = l->ay = l->by = y;
    }
    if (y < l->ay) { l->ax = x; l->ay = y; }
    if (y > l->by) { l->bx = x; l->by = y; }
    l->lx = x;
    l->ly = y;
    l->n++;
}

void dt_svg_line_gap(dt_svg_line *l) {
    flush(l);
    l->col = LONG_MIN;
    l->pen_up = 1;
}

void dt_svg_line_end(dt_svg_line *l) {
    flush(l);
    fputs("\"/>\n", l->f);
}

void dt_svg_text(FILE *f, double x, double y, const char *anchor, const char *cls, const char *text) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" class=\"%s\">", x, y, anchor, cls);
    dt_html_esc(f, text);
    fputs("</text>", f);
}
