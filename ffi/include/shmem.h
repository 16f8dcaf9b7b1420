/*
 * shmem.h: the core of OpenSHMEM 1.5 on hmpi's global address space
 * (libhmpi). Compile with hshmemcc (or hmpicc), run under hmpirun.
 *
 * What is here: shmem_init / _init_thread / _finalize / _global_exit,
 * shmem_my_pe / _n_pes, the symmetric heap (shmem_malloc / _calloc /
 * _align / _free, collective over all PEs), typed and sized put / get /
 * p / g and their _nbi forms, putmem / getmem, quiet / fence,
 * barrier_all / sync_all, wait_until / test, the atomics (fetch, set,
 * swap, compare_swap, inc, fetch_inc, add, fetch_add, and / or / xor and
 * their fetch_ forms), teams (SHMEM_TEAM_WORLD, split_strided, my_pe,
 * n_pes, translate_pe, sync, destroy), broadcast, alltoall, fcollect and
 * the reductions (and / or / xor / max / min / sum / prod) on teams,
 * shmem_ptr and shmem_addr_accessible / shmem_pe_accessible; the C11
 * type-generic names (shmem_put, shmem_atomic_fetch_add, ...) where the
 * compiler has _Generic.
 *
 * What is not: contexts, strided (iput / iget), signals, locks,
 * wait_until_all / any / some, the deprecated active-set collectives,
 * and reductions of long double and complex types.
 *
 * Symmetric addresses: every put / get / atomic / wait names its remote
 * object by the address of the same object here, which must lie in the
 * symmetric heap (an allocation of shmem_malloc / _calloc / _align). Global
 * and static variables are not symmetric here: an address outside the
 * symmetric heap, a PE out of range, or an access past the end of its
 * allocation prints the reason and ends the job (as shmem_global_exit),
 * the behaviour OpenSHMEM leaves to the implementation for invalid input.
 * shmem_ptr and shmem_addr_accessible return NULL / 0 for such an address
 * instead. All PEs share one node, so shmem_ptr gives a usable address for
 * every PE's symmetric objects.
 */
#ifndef HMPI_SHMEM_H_INCLUDED
#define HMPI_SHMEM_H_INCLUDED

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 64
#define SHMEM_VENDOR_STRING "hmpi"

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_LE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_GE 5

/* Teams: handles of the runtime's teams. SHMEM_TEAM_SHARED (the PEs that
 * share memory) is every PE, as all run on one node. */
typedef struct hshmem_team *shmem_team_t;
#define SHMEM_TEAM_WORLD ((shmem_team_t)1)
#define SHMEM_TEAM_SHARED ((shmem_team_t)1)
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)
typedef struct {
    int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS 1L

/* ------------------------------------------------------------- library */

void shmem_init(void);
int shmem_init_thread(int requested, int *provided);
void shmem_query_thread(int *provided);
void shmem_finalize(void);
void shmem_global_exit(int status)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);

/* ---------------------------------------------------- symmetric heap */

void *shmem_malloc(size_t size);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void shmem_free(void *ptr);

/* -------------------------------------------------------------- RMA */

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe);

/* ------------------------------------------------ ordering, barriers */

void shmem_quiet(void);
void shmem_fence(void);
void shmem_barrier_all(void);
void shmem_sync_all(void);

/* ------------------------------------------------------------- teams */

int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride,
                             int size, const shmem_team_config_t *config,
                             long config_mask, shmem_team_t *new_team);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe,
                            shmem_team_t dest_team);
int shmem_team_sync(shmem_team_t team);
void shmem_team_destroy(shmem_team_t team);

/* ------------------------------------------------------- collectives */

int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source,
                       size_t nelems, int PE_root);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source,
                      size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source,
                      size_t nelems);

/* ------------------------------------------ the typed forms, inline */

/* Entry points of the typed forms (not part of OpenSHMEM). `kind` is the
 * element type: its size, plus 16 if unsigned, plus 32 if floating. */
#define HSHMEM_SIGNED(T) ((int)sizeof(T))
#define HSHMEM_UNSIGNED(T) (16 + (int)sizeof(T))
#define HSHMEM_FLOATING(T) (32 + (int)sizeof(T))
#define HSHMEM_CHAR_KIND (CHAR_MIN < 0 ? HSHMEM_SIGNED(char) : HSHMEM_UNSIGNED(char))
enum {
    HSHMEM_AMO_FETCH = 0,
    HSHMEM_AMO_REPLACE = 1,
    HSHMEM_AMO_SUM = 2,
    HSHMEM_AMO_AND = 3,
    HSHMEM_AMO_OR = 4,
    HSHMEM_AMO_XOR = 5,
    HSHMEM_AMO_CSWAP = 6
};
enum {
    HSHMEM_RED_AND = 0,
    HSHMEM_RED_OR = 1,
    HSHMEM_RED_XOR = 2,
    HSHMEM_RED_MAX = 3,
    HSHMEM_RED_MIN = 4,
    HSHMEM_RED_SUM = 5,
    HSHMEM_RED_PROD = 6
};
/* The element at `dest` on `pe` combined with *value (op), or swapped
 * for *value if it equals *cond (HSHMEM_AMO_CSWAP); the element from
 * before into *result unless result is NULL. */
void hshmem_amo(void *dest, const void *value, const void *cond, void *result,
                int kind, int op, int pe);
void hshmem_wait_until(void *ivar, int kind, int cmp, const void *value);
int hshmem_test(void *ivar, int kind, int cmp, const void *value);
int hshmem_reduce(shmem_team_t team, void *dest, const void *source,
                  size_t nreduce, int kind, int op);

/* X(TYPE, TYPENAME, KIND) over the standard RMA types. */
#define HSHMEM_RMA_TYPES(X)                                                 \
    X(float, float, HSHMEM_FLOATING(float))                                 \
    X(double, double, HSHMEM_FLOATING(double))                              \
    X(long double, longdouble, 0)                                           \
    X(char, char, HSHMEM_CHAR_KIND)                                         \
    X(signed char, schar, HSHMEM_SIGNED(signed char))                       \
    X(short, short, HSHMEM_SIGNED(short))                                   \
    X(int, int, HSHMEM_SIGNED(int))                                         \
    X(long, long, HSHMEM_SIGNED(long))                                      \
    X(long long, longlong, HSHMEM_SIGNED(long long))                        \
    X(unsigned char, uchar, HSHMEM_UNSIGNED(unsigned char))                 \
    X(unsigned short, ushort, HSHMEM_UNSIGNED(unsigned short))              \
    X(unsigned int, uint, HSHMEM_UNSIGNED(unsigned int))                    \
    X(unsigned long, ulong, HSHMEM_UNSIGNED(unsigned long))                 \
    X(unsigned long long, ulonglong, HSHMEM_UNSIGNED(unsigned long long))   \
    X(int8_t, int8, HSHMEM_SIGNED(int8_t))                                  \
    X(int16_t, int16, HSHMEM_SIGNED(int16_t))                               \
    X(int32_t, int32, HSHMEM_SIGNED(int32_t))                               \
    X(int64_t, int64, HSHMEM_SIGNED(int64_t))                               \
    X(uint8_t, uint8, HSHMEM_UNSIGNED(uint8_t))                             \
    X(uint16_t, uint16, HSHMEM_UNSIGNED(uint16_t))                          \
    X(uint32_t, uint32, HSHMEM_UNSIGNED(uint32_t))                          \
    X(uint64_t, uint64, HSHMEM_UNSIGNED(uint64_t))                          \
    X(size_t, size, HSHMEM_UNSIGNED(size_t))                                \
    X(ptrdiff_t, ptrdiff, HSHMEM_SIGNED(ptrdiff_t))

/* The standard AMO types (inc, fetch_inc, add, fetch_add, compare_swap). */
#define HSHMEM_AMO_TYPES(X)                                                 \
    X(int, int, HSHMEM_SIGNED(int))                                         \
    X(long, long, HSHMEM_SIGNED(long))                                      \
    X(long long, longlong, HSHMEM_SIGNED(long long))                        \
    X(unsigned int, uint, HSHMEM_UNSIGNED(unsigned int))                    \
    X(unsigned long, ulong, HSHMEM_UNSIGNED(unsigned long))                 \
    X(unsigned long long, ulonglong, HSHMEM_UNSIGNED(unsigned long long))   \
    X(int32_t, int32, HSHMEM_SIGNED(int32_t))                               \
    X(int64_t, int64, HSHMEM_SIGNED(int64_t))                               \
    X(uint32_t, uint32, HSHMEM_UNSIGNED(uint32_t))                          \
    X(uint64_t, uint64, HSHMEM_UNSIGNED(uint64_t))                          \
    X(size_t, size, HSHMEM_UNSIGNED(size_t))                                \
    X(ptrdiff_t, ptrdiff, HSHMEM_SIGNED(ptrdiff_t))

/* The extended AMO types (fetch, set, swap): the standard ones and these. */
#define HSHMEM_EXT_AMO_TYPES(X)                                             \
    HSHMEM_AMO_TYPES(X)                                                     \
    X(float, float, HSHMEM_FLOATING(float))                                 \
    X(double, double, HSHMEM_FLOATING(double))

/* The bitwise AMO types (and, or, xor and their fetch_ forms). */
#define HSHMEM_BITWISE_AMO_TYPES(X)                                         \
    X(unsigned int, uint, HSHMEM_UNSIGNED(unsigned int))                    \
    X(unsigned long, ulong, HSHMEM_UNSIGNED(unsigned long))                 \
    X(unsigned long long, ulonglong, HSHMEM_UNSIGNED(unsigned long long))   \
    X(int32_t, int32, HSHMEM_SIGNED(int32_t))                               \
    X(int64_t, int64, HSHMEM_SIGNED(int64_t))                               \
    X(uint32_t, uint32, HSHMEM_UNSIGNED(uint32_t))                          \
    X(uint64_t, uint64, HSHMEM_UNSIGNED(uint64_t))

/* The point-to-point synchronization types (wait_until, test). */
#define HSHMEM_SYNC_TYPES(X)                                                \
    X(short, short, HSHMEM_SIGNED(short))                                   \
    X(int, int, HSHMEM_SIGNED(int))                                         \
    X(long, long, HSHMEM_SIGNED(long))                                      \
    X(long long, longlong, HSHMEM_SIGNED(long long))                        \
    X(unsigned short, ushort, HSHMEM_UNSIGNED(unsigned short))              \
    X(unsigned int, uint, HSHMEM_UNSIGNED(unsigned int))                    \
    X(unsigned long, ulong, HSHMEM_UNSIGNED(unsigned long))                 \
    X(unsigned long long, ulonglong, HSHMEM_UNSIGNED(unsigned long long))   \
    X(int32_t, int32, HSHMEM_SIGNED(int32_t))                               \
    X(int64_t, int64, HSHMEM_SIGNED(int64_t))                               \
    X(uint32_t, uint32, HSHMEM_UNSIGNED(uint32_t))                          \
    X(uint64_t, uint64, HSHMEM_UNSIGNED(uint64_t))                          \
    X(size_t, size, HSHMEM_UNSIGNED(size_t))                                \
    X(ptrdiff_t, ptrdiff, HSHMEM_SIGNED(ptrdiff_t))

/* The bitwise reduction types (and, or, xor). */
#define HSHMEM_BITWISE_RED_TYPES(X)                                         \
    X(unsigned char, uchar, HSHMEM_UNSIGNED(unsigned char))                 \
    X(unsigned short, ushort, HSHMEM_UNSIGNED(unsigned short))              \
    X(unsigned int, uint, HSHMEM_UNSIGNED(unsigned int))                    \
    X(unsigned long, ulong, HSHMEM_UNSIGNED(unsigned long))                 \
    X(unsigned long long, ulonglong, HSHMEM_UNSIGNED(unsigned long long))   \
    X(int8_t, int8, HSHMEM_SIGNED(int8_t))                                  \
    X(int16_t, int16, HSHMEM_SIGNED(int16_t))                               \
    X(int32_t, int32, HSHMEM_SIGNED(int32_t))                               \
    X(int64_t, int64, HSHMEM_SIGNED(int64_t))                               \
    X(uint8_t, uint8, HSHMEM_UNSIGNED(uint8_t))                             \
    X(uint16_t, uint16, HSHMEM_UNSIGNED(uint16_t))                          \
    X(uint32_t, uint32, HSHMEM_UNSIGNED(uint32_t))                          \
    X(uint64_t, uint64, HSHMEM_UNSIGNED(uint64_t))                          \
    X(size_t, size, HSHMEM_UNSIGNED(size_t))

/* The arithmetic reduction types (max, min, sum, prod), without long
 * double and the complex types. */
#define HSHMEM_ARITH_RED_TYPES(X)                                           \
    X(char, char, HSHMEM_CHAR_KIND)                                         \
    X(signed char, schar, HSHMEM_SIGNED(signed char))                       \
    X(short, short, HSHMEM_SIGNED(short))                                   \
    X(int, int, HSHMEM_SIGNED(int))                                         \
    X(long, long, HSHMEM_SIGNED(long))                                      \
    X(long long, longlong, HSHMEM_SIGNED(long long))                        \
    X(ptrdiff_t, ptrdiff, HSHMEM_SIGNED(ptrdiff_t))                         \
    X(unsigned char, uchar, HSHMEM_UNSIGNED(unsigned char))                 \
    X(unsigned short, ushort, HSHMEM_UNSIGNED(unsigned short))              \
    X(unsigned int, uint, HSHMEM_UNSIGNED(unsigned int))                    \
    X(unsigned long, ulong, HSHMEM_UNSIGNED(unsigned long))                 \
    X(unsigned long long, ulonglong, HSHMEM_UNSIGNED(unsigned long long))   \
    X(int8_t, int8, HSHMEM_SIGNED(int8_t))                                  \
    X(int16_t, int16, HSHMEM_SIGNED(int16_t))                               \
    X(int32_t, int32, HSHMEM_SIGNED(int32_t))                               \
    X(int64_t, int64, HSHMEM_SIGNED(int64_t))                               \
    X(uint8_t, uint8, HSHMEM_UNSIGNED(uint8_t))                             \
    X(uint16_t, uint16, HSHMEM_UNSIGNED(uint16_t))                          \
    X(uint32_t, uint32, HSHMEM_UNSIGNED(uint32_t))                          \
    X(uint64_t, uint64, HSHMEM_UNSIGNED(uint64_t))                          \
    X(size_t, size, HSHMEM_UNSIGNED(size_t))                                \
    X(float, float, HSHMEM_FLOATING(float))                                 \
    X(double, double, HSHMEM_FLOATING(double))

/* put, get, p, g, their _nbi forms, broadcast and alltoall of a type. */
#define HSHMEM_DEFINE_RMA(T, N, K)                                          \
    static inline void shmem_##N##_put(T *dest, const T *source,            \
                                       size_t nelems, int pe) {             \
        shmem_putmem(dest, source, nelems * sizeof(T), pe);                 \
    }                                                                       \
    static inline void shmem_##N##_get(T *dest, const T *source,            \
                                       size_t nelems, int pe) {             \
        shmem_getmem(dest, source, nelems * sizeof(T), pe);                 \
    }                                                                       \
    static inline void shmem_##N##_put_nbi(T *dest, const T *source,        \
                                           size_t nelems, int pe) {         \
        shmem_putmem_nbi(dest, source, nelems * sizeof(T), pe);             \
    }                                                                       \
    static inline void shmem_##N##_get_nbi(T *dest, const T *source,        \
                                           size_t nelems, int pe) {         \
        shmem_getmem_nbi(dest, source, nelems * sizeof(T), pe);             \
    }                                                                       \
    static inline void shmem_##N##_p(T *dest, T value, int pe) {            \
        shmem_putmem(dest, &value, sizeof(T), pe);                          \
    }                                                                       \
    static inline T shmem_##N##_g(const T *source, int pe) {                \
        T value;                                                            \
        shmem_getmem(&value, source, sizeof(T), pe);                        \
        return value;                                                       \
    }                                                                       \
    static inline int shmem_##N##_broadcast(shmem_team_t team, T *dest,     \
                                            const T *source, size_t nelems, \
                                            int PE_root) {                  \
        return shmem_broadcastmem(team, dest, source, nelems * sizeof(T),   \
                                  PE_root);                                 \
    }                                                                       \
    static inline int shmem_##N##_alltoall(shmem_team_t team, T *dest,      \
                                           const T *source, size_t nelems) {\
        return shmem_alltoallmem(team, dest, source, nelems * sizeof(T));   \
    }                                                                       \
    static inline int shmem_##N##_fcollect(shmem_team_t team, T *dest,      \
                                           const T *source, size_t nelems) {\
        return shmem_fcollectmem(team, dest, source, nelems * sizeof(T));   \
    }
HSHMEM_RMA_TYPES(HSHMEM_DEFINE_RMA)

/* put8 ... put128: elements of that many bits. */
#define HSHMEM_DEFINE_SIZED(BITS)                                           \
    static inline void shmem_put##BITS(void *dest, const void *source,      \
                                       size_t nelems, int pe) {             \
        shmem_putmem(dest, source, nelems * (BITS / 8), pe);                \
    }                                                                       \
    static inline void shmem_get##BITS(void *dest, const void *source,      \
                                       size_t nelems, int pe) {             \
        shmem_getmem(dest, source, nelems * (BITS / 8), pe);                \
    }                                                                       \
    static inline void shmem_put##BITS##_nbi(void *dest, const void *source,\
                                             size_t nelems, int pe) {       \
        shmem_putmem_nbi(dest, source, nelems * (BITS / 8), pe);            \
    }                                                                       \
    static inline void shmem_get##BITS##_nbi(void *dest, const void *source,\
                                             size_t nelems, int pe) {       \
        shmem_getmem_nbi(dest, source, nelems * (BITS / 8), pe);            \
    }
HSHMEM_DEFINE_SIZED(8)
HSHMEM_DEFINE_SIZED(16)
HSHMEM_DEFINE_SIZED(32)
HSHMEM_DEFINE_SIZED(64)
HSHMEM_DEFINE_SIZED(128)

#define HSHMEM_DEFINE_EXT_AMO(T, N, K)                                      \
    static inline T shmem_##N##_atomic_fetch(const T *source, int pe) {     \
        T old;                                                              \
        hshmem_amo((void *)source, NULL, NULL, &old, K, HSHMEM_AMO_FETCH,   \
                   pe);                                                     \
        return old;                                                         \
    }                                                                       \
    static inline void shmem_##N##_atomic_set(T *dest, T value, int pe) {  \
        hshmem_amo(dest, &value, NULL, NULL, K, HSHMEM_AMO_REPLACE, pe);    \
    }                                                                       \
    static inline T shmem_##N##_atomic_swap(T *dest, T value, int pe) {    \
        T old;                                                              \
        hshmem_amo(dest, &value, NULL, &old, K, HSHMEM_AMO_REPLACE, pe);    \
        return old;                                                         \
    }
HSHMEM_EXT_AMO_TYPES(HSHMEM_DEFINE_EXT_AMO)

#define HSHMEM_DEFINE_AMO(T, N, K)                                          \
    static inline T shmem_##N##_atomic_compare_swap(T *dest, T cond,        \
                                                    T value, int pe) {      \
        T old;                                                              \
        hshmem_amo(dest, &value, &cond, &old, K, HSHMEM_AMO_CSWAP, pe);     \
        return old;                                                         \
    }                                                                       \
    static inline void shmem_##N##_atomic_add(T *dest, T value, int pe) {   \
        hshmem_amo(dest, &value, NULL, NULL, K, HSHMEM_AMO_SUM, pe);        \
    }                                                                       \
    static inline T shmem_##N##_atomic_fetch_add(T *dest, T value,         \
                                                 int pe) {                  \
        T old;                                                              \
        hshmem_amo(dest, &value, NULL, &old, K, HSHMEM_AMO_SUM, pe);        \
        return old;                                                         \
    }                                                                       \
    static inline void shmem_##N##_atomic_inc(T *dest, int pe) {            \
        T one = 1;                                                          \
        hshmem_amo(dest, &one, NULL, NULL, K, HSHMEM_AMO_SUM, pe);          \
    }                                                                       \
    static inline T shmem_##N##_atomic_fetch_inc(T *dest, int pe) {         \
        T one = 1, old;                                                     \
        hshmem_amo(dest, &one, NULL, &old, K, HSHMEM_AMO_SUM, pe);          \
        return old;                                                         \
    }
HSHMEM_AMO_TYPES(HSHMEM_DEFINE_AMO)

#define HSHMEM_DEFINE_BITWISE_AMO_OP(T, N, K, OP, CODE)                     \
    static inline void shmem_##N##_atomic_##OP(T *dest, T value, int pe) {  \
        hshmem_amo(dest, &value, NULL, NULL, K, CODE, pe);                  \
    }                                                                       \
    static inline T shmem_##N##_atomic_fetch_##OP(T *dest, T value,         \
                                                  int pe) {                 \
        T old;                                                              \
        hshmem_amo(dest, &value, NULL, &old, K, CODE, pe);                  \
        return old;                                                         \
    }
#define HSHMEM_DEFINE_BITWISE_AMO(T, N, K)                                  \
    HSHMEM_DEFINE_BITWISE_AMO_OP(T, N, K, and, HSHMEM_AMO_AND)              \
    HSHMEM_DEFINE_BITWISE_AMO_OP(T, N, K, or, HSHMEM_AMO_OR)                \
    HSHMEM_DEFINE_BITWISE_AMO_OP(T, N, K, xor, HSHMEM_AMO_XOR)
HSHMEM_BITWISE_AMO_TYPES(HSHMEM_DEFINE_BITWISE_AMO)

#define HSHMEM_DEFINE_SYNC(T, N, K)                                         \
    static inline void shmem_##N##_wait_until(T *ivar, int cmp,            \
                                              T cmp_value) {                \
        hshmem_wait_until(ivar, K, cmp, &cmp_value);                        \
    }                                                                       \
    static inline int shmem_##N##_test(T *ivar, int cmp, T cmp_value) {     \
        return hshmem_test(ivar, K, cmp, &cmp_value);                       \
    }
HSHMEM_SYNC_TYPES(HSHMEM_DEFINE_SYNC)

#define HSHMEM_DEFINE_REDUCE_OP(T, N, K, OP, CODE)                          \
    static inline int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, \
                                                const T *source,            \
                                                size_t nreduce) {           \
        return hshmem_reduce(team, dest, source, nreduce, K, CODE);         \
    }
#define HSHMEM_DEFINE_BITWISE_RED(T, N, K)                                  \
    HSHMEM_DEFINE_REDUCE_OP(T, N, K, and, HSHMEM_RED_AND)                   \
    HSHMEM_DEFINE_REDUCE_OP(T, N, K, or, HSHMEM_RED_OR)                     \
    HSHMEM_DEFINE_REDUCE_OP(T, N, K, xor, HSHMEM_RED_XOR)
#define HSHMEM_DEFINE_ARITH_RED(T, N, K)                                    \
    HSHMEM_DEFINE_REDUCE_OP(T, N, K, max, HSHMEM_RED_MAX)                   \
    HSHMEM_DEFINE_REDUCE_OP(T, N, K, min, HSHMEM_RED_MIN)                   \
    HSHMEM_DEFINE_REDUCE_OP(T, N, K, sum, HSHMEM_RED_SUM)                   \
    HSHMEM_DEFINE_REDUCE_OP(T, N, K, prod, HSHMEM_RED_PROD)
HSHMEM_BITWISE_RED_TYPES(HSHMEM_DEFINE_BITWISE_RED)
HSHMEM_ARITH_RED_TYPES(HSHMEM_DEFINE_ARITH_RED)

#ifdef __cplusplus
}
#endif

/* ------------------------------------------ C11 type-generic names */

#if !defined(__cplusplus) && defined(__STDC_VERSION__) &&                   \
    __STDC_VERSION__ >= 201112L
/* The distinct standard C types (the fixed-width ones are aliases of
 * these), the last one apart: _Generic takes no trailing comma. */
#define HSHMEM_GENERIC_RMA(OP)                                              \
    float : shmem_float_##OP, double : shmem_double_##OP,                   \
    long double : shmem_longdouble_##OP, char : shmem_char_##OP,            \
    signed char : shmem_schar_##OP, short : shmem_short_##OP,               \
    int : shmem_int_##OP, long : shmem_long_##OP,                           \
    long long : shmem_longlong_##OP, unsigned char : shmem_uchar_##OP,      \
    unsigned short : shmem_ushort_##OP, unsigned int : shmem_uint_##OP,     \
    unsigned long : shmem_ulong_##OP,                                       \
    unsigned long long : shmem_ulonglong_##OP
#define HSHMEM_GENERIC_AMO(OP)                                              \
    int : shmem_int_##OP, long : shmem_long_##OP,                           \
    long long : shmem_longlong_##OP, unsigned int : shmem_uint_##OP,        \
    unsigned long : shmem_ulong_##OP,                                       \
    unsigned long long : shmem_ulonglong_##OP
#define HSHMEM_GENERIC_EXT_AMO(OP)                                          \
    HSHMEM_GENERIC_AMO(OP), float : shmem_float_##OP,                       \
    double : shmem_double_##OP
#define HSHMEM_GENERIC_SYNC(OP)                                             \
    HSHMEM_GENERIC_AMO(OP), short : shmem_short_##OP,                       \
    unsigned short : shmem_ushort_##OP

#define shmem_put(dest, source, nelems, pe)                                 \
    _Generic(*(dest), HSHMEM_GENERIC_RMA(put))(dest, source, nelems, pe)
#define shmem_get(dest, source, nelems, pe)                                 \
    _Generic(*(dest), HSHMEM_GENERIC_RMA(get))(dest, source, nelems, pe)
#define shmem_put_nbi(dest, source, nelems, pe)                             \
    _Generic(*(dest), HSHMEM_GENERIC_RMA(put_nbi))(dest, source, nelems, pe)
#define shmem_get_nbi(dest, source, nelems, pe)                             \
    _Generic(*(dest), HSHMEM_GENERIC_RMA(get_nbi))(dest, source, nelems, pe)
#define shmem_p(dest, value, pe)                                            \
    _Generic(*(dest), HSHMEM_GENERIC_RMA(p))(dest, value, pe)
#define shmem_g(source, pe)                                                 \
    _Generic(*(source), HSHMEM_GENERIC_RMA(g))(source, pe)
#define shmem_atomic_fetch(source, pe)                                      \
    _Generic(*(source), HSHMEM_GENERIC_EXT_AMO(atomic_fetch))(source, pe)
#define shmem_atomic_set(dest, value, pe)                                   \
    _Generic(*(dest), HSHMEM_GENERIC_EXT_AMO(atomic_set))(dest, value, pe)
#define shmem_atomic_swap(dest, value, pe)                                  \
    _Generic(*(dest), HSHMEM_GENERIC_EXT_AMO(atomic_swap))(dest, value, pe)
#define shmem_atomic_compare_swap(dest, cond, value, pe)                    \
    _Generic(*(dest), HSHMEM_GENERIC_AMO(atomic_compare_swap))(dest, cond,  \
                                                               value, pe)
#define shmem_atomic_add(dest, value, pe)                                   \
    _Generic(*(dest), HSHMEM_GENERIC_AMO(atomic_add))(dest, value, pe)
#define shmem_atomic_fetch_add(dest, value, pe)                             \
    _Generic(*(dest), HSHMEM_GENERIC_AMO(atomic_fetch_add))(dest, value, pe)
#define shmem_atomic_inc(dest, pe)                                          \
    _Generic(*(dest), HSHMEM_GENERIC_AMO(atomic_inc))(dest, pe)
#define shmem_atomic_fetch_inc(dest, pe)                                    \
    _Generic(*(dest), HSHMEM_GENERIC_AMO(atomic_fetch_inc))(dest, pe)
#define shmem_wait_until(ivar, cmp, cmp_value)                              \
    _Generic(*(ivar), HSHMEM_GENERIC_SYNC(wait_until))(ivar, cmp, cmp_value)
#define shmem_test(ivar, cmp, cmp_value)                                    \
    _Generic(*(ivar), HSHMEM_GENERIC_SYNC(test))(ivar, cmp, cmp_value)
#endif

#endif /* HMPI_SHMEM_H_INCLUDED */
