/*
 * dart.h: the core of DART, the global-address-space runtime interface of
 * the DASH project (dart-if), on hmpi's global address space (libhmpi).
 *
 * Names and signatures follow dart-if: units and teams, groups, global
 * pointers, non-collective and collective global allocation, put/get
 * blocking and with handles, flushes, atomics, barrier and the basic
 * collectives. Compile with hmpicc (or hshmemcc), run under hmpirun.
 *
 * What differs from DASH's DART-MPI:
 *   - dart_gptr_t is the 128-bit layout of hmpi's global pointer: unitid is
 *     the absolute unit id (the rank in the job), segid the segment (0: the
 *     units' local pools of dart_memalloc; 1, 2, ...: team allocations, ids
 *     never reused), flags the slot of the segment's team in the unit's
 *     team table, and the offset in the unit's part of the segment.
 *     dart_gptr_setunit takes a team-relative unit and stores its absolute
 *     id. DART_GPTR_NULL is all zeros.
 *   - dart_put / dart_get complete at once on this node; dart_flush orders
 *     them before what follows. Handles are completed by dart_wait / _test.
 *   - Team ids (dart_team_t) are never reused; a team whose id would not
 *     fit in dart_team_t is refused.
 *   - dart_put / dart_get need src_type == dst_type.
 *
 * Every call returns a dart_ret_t; a bad argument (a freed segment, an
 * offset past the unit's part, a unit outside the team, an unknown team)
 * returns DART_ERR_INVAL, and dart_last_error() describes it.
 */
#ifndef HMPI_DART_H_INCLUDED
#define HMPI_DART_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- types */

typedef enum {
    DART_OK = 0,
    DART_PENDING = 1,
    DART_ERR_INVAL = 2,
    DART_ERR_NOTFOUND = 3,
    DART_ERR_NOTINIT = 4,
    DART_ERR_OTHER = 999
} dart_ret_t;

enum {
    DART_EXIT_SUCCESS = EXIT_SUCCESS,
    DART_EXIT_ABORT = EXIT_FAILURE,
    DART_EXIT_ASSERT = -6
};

typedef enum {
    DART_OP_UNDEFINED = 0,
    DART_OP_MIN,
    DART_OP_MAX,
    DART_OP_SUM,
    DART_OP_PROD,
    DART_OP_BAND,
    DART_OP_LAND,
    DART_OP_BOR,
    DART_OP_LOR,
    DART_OP_BXOR,
    DART_OP_LXOR,
    DART_OP_REPLACE,
    DART_OP_NO_OP
} dart_operation_t;

typedef enum {
    DART_TYPE_UNDEFINED = 0,
    DART_TYPE_BYTE,
    DART_TYPE_SHORT,
    DART_TYPE_INT,
    DART_TYPE_UINT,
    DART_TYPE_LONG,
    DART_TYPE_ULONG,
    DART_TYPE_LONGLONG,
    DART_TYPE_FLOAT,
    DART_TYPE_DOUBLE,
    DART_TYPE_COUNT
} dart_datatype_t;

#if (UINT32_MAX == SIZE_MAX)
#define DART_TYPE_SIZET DART_TYPE_UINT
#else
#define DART_TYPE_SIZET DART_TYPE_ULONG
#endif

typedef int32_t dart_unit_t;
#define DART_UNDEFINED_UNIT_ID ((dart_unit_t)(-1))

/* A unit id in the team of all units. */
typedef struct dart_global_unit {
    dart_unit_t id;
} dart_global_unit_t;

/* A unit id relative to a team. */
typedef struct dart_local_unit {
    dart_unit_t id;
} dart_team_unit_t;

static inline dart_team_unit_t dart_create_team_unit(dart_unit_t unit) {
    dart_team_unit_t u;
    u.id = unit;
    return u;
}
static inline dart_global_unit_t dart_create_global_unit(dart_unit_t unit) {
    dart_global_unit_t u;
    u.id = unit;
    return u;
}
#define DART_TEAM_UNIT_ID(u) (dart_create_team_unit(u))
#define DART_GLOBAL_UNIT_ID(u) (dart_create_global_unit(u))
#define DART_UNDEFINED_TEAM_UNIT_ID DART_TEAM_UNIT_ID(DART_UNDEFINED_UNIT_ID)
#define DART_UNDEFINED_GLOBAL_UNIT_ID DART_GLOBAL_UNIT_ID(DART_UNDEFINED_UNIT_ID)

typedef int16_t dart_team_t;
#define DART_UNDEFINED_TEAM_ID ((dart_team_t)(-1))
#define DART_TEAM_ALL ((dart_team_t)0)
#define DART_TEAM_NULL ((dart_team_t)-1)

typedef enum {
    DART_THREAD_SINGLE = 0,
    DART_THREAD_MULTIPLE = 10
} dart_thread_support_level_t;

/* The global pointer: 128 bits, the layout of hmpi's Gptr. */
typedef struct {
    dart_unit_t unitid; /* absolute unit id */
    uint16_t segid;     /* 0: local pools; >= 1: a team allocation */
    uint16_t flags;     /* the slot of the segment's team */
    union {
        uint64_t offset;
        void *addr;
    } addr_or_offs;     /* bytes from the start of the unit's part */
} dart_gptr_t;

#ifdef __cplusplus
#define DART_GPTR_NULL (dart_gptr_t{0, 0, 0, {0}})
#else
#define DART_GPTR_NULL ((dart_gptr_t){0, 0, 0, {0}})
#endif
#define DART_GPTR_ISNULL(g)                                              \
    ((g).unitid == 0 && (g).segid == 0 && (g).flags == 0 &&             \
     (g).addr_or_offs.offset == 0)
#define DART_GPTR_EQUAL(g1, g2)                                          \
    ((g1).unitid == (g2).unitid && (g1).segid == (g2).segid &&          \
     (g1).flags == (g2).flags &&                                        \
     (g1).addr_or_offs.offset == (g2).addr_or_offs.offset)
#define DART_SEGMENT_LOCAL ((uint16_t)0)

typedef struct dart_group_struct *dart_group_t;
#define DART_GROUP_NULL ((dart_group_t)NULL)

typedef struct dart_handle_struct *dart_handle_t;
#define DART_HANDLE_NULL ((dart_handle_t)NULL)

/* ---------------------------------------------------- initialization */

/* Starts the runtime (MPI_Init, if the program did not) and the global
 * address space: collective over all units. */
dart_ret_t dart_init(int *argc, char ***argv);
dart_ret_t dart_init_thread(int *argc, char ***argv,
                            dart_thread_support_level_t *thread_safety);
/* Frees every team allocation still alive and the local pools
 * (collective); finalizes MPI if dart_init started it. */
dart_ret_t dart_exit(void);
bool dart_initialized(void);
void dart_abort(int errorcode)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;
/* hmpi: what the last call of this thread that failed found wrong
 * ("" if none failed). Valid until the thread's next failing call. */
const char *dart_last_error(void);

/* ------------------------------------------------------ teams, groups */

dart_ret_t dart_myid(dart_global_unit_t *myid);
dart_ret_t dart_size(size_t *size);
dart_ret_t dart_team_myid(dart_team_t teamid, dart_team_unit_t *myid);
dart_ret_t dart_team_size(dart_team_t teamid, size_t *size);

dart_ret_t dart_group_create(dart_group_t *group);
dart_ret_t dart_group_destroy(dart_group_t *group);
dart_ret_t dart_group_clone(const dart_group_t gin, dart_group_t *gout);
dart_ret_t dart_group_union(const dart_group_t g1, const dart_group_t g2,
                            dart_group_t *gout);
dart_ret_t dart_group_intersect(const dart_group_t g1, const dart_group_t g2,
                                dart_group_t *gout);
dart_ret_t dart_group_addmember(dart_group_t g, dart_global_unit_t unitid);
dart_ret_t dart_group_delmember(dart_group_t g, dart_global_unit_t unitid);
dart_ret_t dart_group_ismember(const dart_group_t g, dart_global_unit_t unitid,
                               int32_t *ismember);
dart_ret_t dart_group_size(const dart_group_t g, size_t *size);
dart_ret_t dart_group_getmembers(const dart_group_t g,
                                 dart_global_unit_t *unitids);

dart_ret_t dart_team_get_group(dart_team_t teamid, dart_group_t *group);
/* Collective over teamid; *newteam is DART_TEAM_NULL at units outside
 * group. */
dart_ret_t dart_team_create(dart_team_t teamid, const dart_group_t group,
                            dart_team_t *newteam);
dart_ret_t dart_team_clone(dart_team_t team, dart_team_t *newteam);
dart_ret_t dart_team_destroy(dart_team_t *teamid);
dart_ret_t dart_team_unit_l2g(dart_team_t team, dart_team_unit_t localid,
                              dart_global_unit_t *globalid);
dart_ret_t dart_team_unit_g2l(dart_team_t team, dart_global_unit_t globalid,
                              dart_team_unit_t *localid);

/* ---------------------------------------------------- global memory */

dart_ret_t dart_gptr_getaddr(const dart_gptr_t gptr, void **addr);
dart_ret_t dart_gptr_setaddr(dart_gptr_t *gptr, void *addr);
dart_ret_t dart_gptr_incaddr(dart_gptr_t *gptr, int64_t offs);
dart_ret_t dart_gptr_setunit(dart_gptr_t *gptr, dart_team_unit_t unit);

dart_ret_t dart_memalloc(size_t nelem, dart_datatype_t dtype,
                         dart_gptr_t *gptr);
dart_ret_t dart_memfree(dart_gptr_t gptr);
dart_ret_t dart_team_memalloc_aligned(dart_team_t teamid, size_t nelem,
                                      dart_datatype_t dtype,
                                      dart_gptr_t *gptr);
dart_ret_t dart_team_memfree(dart_gptr_t gptr);

/* ---------------------------------------------------- communication */

dart_ret_t dart_barrier(dart_team_t team);
dart_ret_t dart_bcast(void *buf, size_t nelem, dart_datatype_t dtype,
                      dart_team_unit_t root, dart_team_t team);
dart_ret_t dart_allgather(const void *sendbuf, void *recvbuf, size_t nelem,
                          dart_datatype_t dtype, dart_team_t team);
dart_ret_t dart_allreduce(const void *sendbuf, void *recvbuf, size_t nelem,
                          dart_datatype_t dtype, dart_operation_t op,
                          dart_team_t team);
dart_ret_t dart_alltoall(const void *sendbuf, void *recvbuf, size_t nelem,
                         dart_datatype_t dtype, dart_team_t team);

dart_ret_t dart_accumulate(dart_gptr_t gptr, const void *values, size_t nelem,
                           dart_datatype_t dtype, dart_operation_t op);
dart_ret_t dart_fetch_and_op(dart_gptr_t gptr, const void *value, void *result,
                             dart_datatype_t dtype, dart_operation_t op);
dart_ret_t dart_compare_and_swap(dart_gptr_t gptr, const void *value,
                                 const void *compare, void *result,
                                 dart_datatype_t dtype);

dart_ret_t dart_get(void *dest, dart_gptr_t gptr, size_t nelem,
                    dart_datatype_t src_type, dart_datatype_t dst_type);
dart_ret_t dart_put(dart_gptr_t gptr, const void *src, size_t nelem,
                    dart_datatype_t src_type, dart_datatype_t dst_type);
dart_ret_t dart_flush(dart_gptr_t gptr);
dart_ret_t dart_flush_all(dart_gptr_t gptr);
dart_ret_t dart_flush_local(dart_gptr_t gptr);
dart_ret_t dart_flush_local_all(dart_gptr_t gptr);

dart_ret_t dart_get_handle(void *dest, dart_gptr_t gptr, size_t nelem,
                           dart_datatype_t src_type, dart_datatype_t dst_type,
                           dart_handle_t *handle);
dart_ret_t dart_put_handle(dart_gptr_t gptr, const void *src, size_t nelem,
                           dart_datatype_t src_type, dart_datatype_t dst_type,
                           dart_handle_t *handle);
dart_ret_t dart_wait(dart_handle_t *handle);
dart_ret_t dart_waitall(dart_handle_t handles[], size_t n);
dart_ret_t dart_wait_local(dart_handle_t *handle);
dart_ret_t dart_waitall_local(dart_handle_t handles[], size_t n);
dart_ret_t dart_test(dart_handle_t *handle, int32_t *is_finished);
dart_ret_t dart_test_local(dart_handle_t *handle, int32_t *is_finished);
dart_ret_t dart_testall(dart_handle_t handles[], size_t n,
                        int32_t *is_finished);
dart_ret_t dart_testall_local(dart_handle_t handles[], size_t n,
                              int32_t *is_finished);
dart_ret_t dart_handle_free(dart_handle_t *handle);

dart_ret_t dart_get_blocking(void *dest, dart_gptr_t gptr, size_t nelem,
                             dart_datatype_t src_type,
                             dart_datatype_t dst_type);
dart_ret_t dart_put_blocking(dart_gptr_t gptr, const void *src, size_t nelem,
                             dart_datatype_t src_type,
                             dart_datatype_t dst_type);

#ifdef __cplusplus
}
#endif

#endif /* HMPI_DART_H_INCLUDED */
