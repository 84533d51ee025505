/*
 * The kernels of each form, as choose.c puts them in its tables: the plain
 * C ones (the references) and, on x86-64, the AVX2 and AVX-512 ones.
 */
#ifndef SF_CORE_VEC_FORMS_H
#define SF_CORE_VEC_FORMS_H

#include "vec.h"

void sf__net_sort_generic(const sf__median_net *net, int64_t *v, size_t lanes);

#ifdef SF_VEC_X86
void sf__net_sort_avx2(const sf__median_net *net, int64_t *v, size_t lanes);
bool sf__net_narrow_avx2(const sf__median_net *net, const int64_t *v, size_t stride, size_t lanes,
                         int64_t *ret_median);
bool sf__net_pass_avx2(enum sf__net_pass pass, uint32_t *col, uint32_t wires);
sf__split_fn sf__split_avx2;
sf__split_equal_fn sf__split_equal_avx2;
bool sf__fold_grid_avx2(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g);
void sf__clip_rows_avx2(const sf_summary *s, const int64_t *rows, uint32_t n,
                        const int64_t *baseline, int64_t *clipped);
uint32_t sf__whatif_step_avx2(const int64_t *rows, const int64_t *basis, uint32_t R, uint32_t S,
                              struct sf__whatif_lanes *ret);

void sf__net_sort_avx512(const sf__median_net *net, int64_t *v, size_t lanes);
bool sf__net_narrow_avx512(const sf__median_net *net, const int64_t *v, size_t stride, size_t lanes,
                           int64_t *ret_median);
bool sf__net_pass_avx512(enum sf__net_pass pass, uint32_t *col, uint32_t wires);
sf__split_fn sf__split_avx512;
sf__split_equal_fn sf__split_equal_avx512;
bool sf__fold_grid_avx512(sf_summary *s, sf_step_summary *st, const struct sf__grid_step *g);
void sf__clip_rows_avx512(const sf_summary *s, const int64_t *rows, uint32_t n,
                          const int64_t *baseline, int64_t *clipped);
uint32_t sf__whatif_step_avx512(const int64_t *rows, const int64_t *basis, uint32_t R, uint32_t S,
                                struct sf__whatif_lanes *ret);
#endif

#endif
