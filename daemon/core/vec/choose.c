/*
 * The one place that chooses the core's instruction set: a table per form,
 * and the form this process runs, chosen once (the way simdjson picks an
 * implementation). SF_CORE_ISA forces a form; one this CPU lacks is
 * refused rather than replaced, so that a run asked to test a form never
 * silently tests another.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forms.h"

static const sf__vec forms[SF__ISA_COUNT] = {
    [SF__ISA_GENERIC] = {.isa = SF__ISA_GENERIC,
                         .name = "generic",
                         .net_sort = sf__net_sort_generic},
#ifdef SF_VEC_X86
    [SF__ISA_AVX2] = {.isa = SF__ISA_AVX2,
                      .name = "avx2",
                      .net_sort = sf__net_sort_avx2,
                      .net_narrow = sf__net_narrow_avx2,
                      .net_pass = sf__net_pass_avx2,
                      .net_pays = true,
                      .split_below = sf__split_avx2,
                      .split_above = sf__split_equal_avx2,
                      .fold_grid = sf__fold_grid_avx2,
                      .clip_rows = sf__clip_rows_avx2,
                      .fold_quads = true,
                      .whatif_step = sf__whatif_step_avx2},
    [SF__ISA_AVX512] = {.isa = SF__ISA_AVX512,
                        .name = "avx512",
                        .net_sort = sf__net_sort_avx512,
                        .net_narrow = sf__net_narrow_avx512,
                        .net_pass = sf__net_pass_avx512,
                        .net_pays = true,
                        .split_below = sf__split_avx512,
                        .split_above = sf__split_equal_avx512,
                        .fold_grid = sf__fold_grid_avx512,
                        .clip_rows = sf__clip_rows_avx512,
                        .whatif_step = sf__whatif_step_avx512},
#endif
};

/* Whether this CPU runs form isa. The AVX-512 form's offsets are packed
 * with AVX2, which every AVX-512F CPU has. */
static bool cpu_has(enum sf__isa isa)
{
    switch (isa) {
    case SF__ISA_GENERIC:
        return true;
#ifdef SF_VEC_X86
    case SF__ISA_AVX2:
        return __builtin_cpu_supports("avx2");
    case SF__ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2");
#endif
    default:
        return false;
    }
}

const sf__vec *sf__vec_form(enum sf__isa isa)
{
    return (unsigned)isa < SF__ISA_COUNT && cpu_has(isa) ? &forms[isa] : NULL;
}

static const sf__vec *best(void)
{
    for (int isa = SF__ISA_COUNT - 1; isa > SF__ISA_GENERIC; isa--)
        if (sf__vec_form((enum sf__isa)isa))
            return &forms[isa];
    return &forms[SF__ISA_GENERIC];
}

/* SF_CORE_ISA's form, or a refusal: the one exit in the core, because a
 * kernel call has no error to return and a forced form must not be
 * replaced by another. */
static const sf__vec *requested(const char *name)
{
    static const char *const names[SF__ISA_COUNT] = {"generic", "avx2", "avx512"};
    if (name == NULL || name[0] == '\0')
        return best();
    for (int isa = 0; isa < SF__ISA_COUNT; isa++) {
        if (strcmp(name, names[isa]) != 0)
            continue;
        if (sf__vec_form((enum sf__isa)isa))
            return &forms[isa];
        fprintf(stderr,
                "SF_CORE_ISA=%s: this CPU (or this build) lacks that form; its best is %s\n", name,
                best()->name);
        exit(SF_CORE_ISA_REFUSED);
    }
    fprintf(stderr, "SF_CORE_ISA=%s: unknown form (generic, avx2 or avx512)\n", name);
    exit(SF_CORE_ISA_REFUSED);
}

const sf__vec *sf__vec_chosen(void)
{
    /* The same for every caller: threads that race to set it set the same. */
    static _Atomic(const sf__vec *) chosen;
    const sf__vec *v = atomic_load_explicit(&chosen, memory_order_acquire);
    if (v == NULL) {
        v = requested(getenv("SF_CORE_ISA"));
        atomic_store_explicit(&chosen, v, memory_order_release);
    }
    return v;
}

const char *sf_core_isa(void)
{
    return sf__vec_chosen()->name;
}
