/*
 * mpi.h -- the C interface of hmpi (libhmpi).
 *
 * Handle types, predefined handle values, constants and the MPI_Status
 * layout follow the MPI 5.0 standard ABI (its late-2025 values; see
 * docs/c-abi.md for the sources),
 * so that a program compiled against the standard ABI header runs with
 * libhmpi. Only the routines libhmpi implements are declared; see
 * docs/c-abi.md for the list, the choices made and the extensions (HMPI_*).
 *
 * Every routine MPI_X has a profiling twin PMPI_X.
 */
#ifndef HMPI_MPI_H
#define HMPI_MPI_H

#include <stddef.h>
#include <stdint.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define MPI_VERSION    5
#define MPI_SUBVERSION 0

#define MPI_ABI_VERSION    1
#define MPI_ABI_SUBVERSION 0

/* This library. */
#define HMPI_VERSION_MAJOR 0
#define HMPI_VERSION_MINOR 1

/* ------------------------------------------------------------------ types */

typedef intptr_t MPI_Aint;
typedef int64_t MPI_Offset;
typedef MPI_Offset MPI_Count;

typedef struct {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int MPI_internal[5];
} MPI_Status;

/* ------------------------------------------------------ predefined handles */

typedef struct MPI_ABI_Op *MPI_Op;
#define MPI_OP_NULL                    ((MPI_Op)0x00000020)
#define MPI_SUM                        ((MPI_Op)0x00000021)
#define MPI_MIN                        ((MPI_Op)0x00000022)
#define MPI_MAX                        ((MPI_Op)0x00000023)
#define MPI_PROD                       ((MPI_Op)0x00000024)
#define MPI_BAND                       ((MPI_Op)0x00000028)
#define MPI_BOR                        ((MPI_Op)0x00000029)
#define MPI_BXOR                       ((MPI_Op)0x0000002a)
#define MPI_LAND                       ((MPI_Op)0x00000030)
#define MPI_LOR                        ((MPI_Op)0x00000031)
#define MPI_LXOR                       ((MPI_Op)0x00000032)
#define MPI_MINLOC                     ((MPI_Op)0x00000038)
#define MPI_MAXLOC                     ((MPI_Op)0x00000039)
#define MPI_REPLACE                    ((MPI_Op)0x0000003c)
#define MPI_NO_OP                      ((MPI_Op)0x0000003d)

typedef struct MPI_ABI_Comm *MPI_Comm;
#define MPI_COMM_NULL                  ((MPI_Comm)0x00000100)
#define MPI_COMM_WORLD                 ((MPI_Comm)0x00000101)
#define MPI_COMM_SELF                  ((MPI_Comm)0x00000102)

typedef struct MPI_ABI_Group *MPI_Group;
#define MPI_GROUP_NULL                 ((MPI_Group)0x00000108)
#define MPI_GROUP_EMPTY                ((MPI_Group)0x00000109)

typedef struct MPI_ABI_Win *MPI_Win;
#define MPI_WIN_NULL                   ((MPI_Win)0x00000110)

typedef struct MPI_ABI_File *MPI_File;
#define MPI_FILE_NULL                  ((MPI_File)0x00000118)

typedef struct MPI_ABI_Session *MPI_Session;
#define MPI_SESSION_NULL               ((MPI_Session)0x00000120)

typedef struct MPI_ABI_Message *MPI_Message;
#define MPI_MESSAGE_NULL               ((MPI_Message)0x00000128)
#define MPI_MESSAGE_NO_PROC            ((MPI_Message)0x00000129)

typedef struct MPI_ABI_Info *MPI_Info;
#define MPI_INFO_NULL                  ((MPI_Info)0x00000130)
#define MPI_INFO_ENV                   ((MPI_Info)0x00000131)

typedef struct MPI_ABI_Errhandler *MPI_Errhandler;
#define MPI_ERRHANDLER_NULL            ((MPI_Errhandler)0x00000140)
#define MPI_ERRORS_ARE_FATAL           ((MPI_Errhandler)0x00000141)
#define MPI_ERRORS_RETURN              ((MPI_Errhandler)0x00000143)
#define MPI_ERRORS_ABORT               ((MPI_Errhandler)0x00000142)

typedef struct MPI_ABI_Request *MPI_Request;
#define MPI_REQUEST_NULL               ((MPI_Request)0x00000180)

typedef struct MPI_ABI_Datatype *MPI_Datatype;
#define MPI_DATATYPE_NULL              ((MPI_Datatype)0x00000200)
#define MPI_AINT                       ((MPI_Datatype)0x00000201)
#define MPI_COUNT                      ((MPI_Datatype)0x00000202)
#define MPI_OFFSET                     ((MPI_Datatype)0x00000203)
#define MPI_PACKED                     ((MPI_Datatype)0x00000207)
#define MPI_SHORT                      ((MPI_Datatype)0x00000208)
#define MPI_INT                        ((MPI_Datatype)0x00000209)
#define MPI_LONG                       ((MPI_Datatype)0x0000020a)
#define MPI_LONG_LONG                  ((MPI_Datatype)0x0000020b)
#define MPI_LONG_LONG_INT              MPI_LONG_LONG
#define MPI_UNSIGNED_SHORT             ((MPI_Datatype)0x0000020c)
#define MPI_UNSIGNED                   ((MPI_Datatype)0x0000020d)
#define MPI_UNSIGNED_LONG              ((MPI_Datatype)0x0000020e)
#define MPI_UNSIGNED_LONG_LONG         ((MPI_Datatype)0x0000020f)
#define MPI_FLOAT                      ((MPI_Datatype)0x00000210)
#define MPI_C_FLOAT_COMPLEX            ((MPI_Datatype)0x00000212)
#define MPI_C_COMPLEX                  MPI_C_FLOAT_COMPLEX
#define MPI_CXX_FLOAT_COMPLEX          ((MPI_Datatype)0x00000213)
#define MPI_DOUBLE                     ((MPI_Datatype)0x00000214)
#define MPI_C_DOUBLE_COMPLEX           ((MPI_Datatype)0x00000216)
#define MPI_CXX_DOUBLE_COMPLEX         ((MPI_Datatype)0x00000217)
#define MPI_LOGICAL                    ((MPI_Datatype)0x00000218)
#define MPI_INTEGER                    ((MPI_Datatype)0x00000219)
#define MPI_REAL                       ((MPI_Datatype)0x0000021a)
#define MPI_COMPLEX                    ((MPI_Datatype)0x0000021b)
#define MPI_DOUBLE_PRECISION           ((MPI_Datatype)0x0000021c)
#define MPI_DOUBLE_COMPLEX             ((MPI_Datatype)0x0000021d)
#define MPI_CHARACTER                  ((MPI_Datatype)0x0000021e)
#define MPI_LONG_DOUBLE                ((MPI_Datatype)0x00000220)
#define MPI_C_LONG_DOUBLE_COMPLEX      ((MPI_Datatype)0x00000224)
#define MPI_CXX_LONG_DOUBLE_COMPLEX    ((MPI_Datatype)0x00000225)
#define MPI_FLOAT_INT                  ((MPI_Datatype)0x00000228)
#define MPI_DOUBLE_INT                 ((MPI_Datatype)0x00000229)
#define MPI_LONG_INT                   ((MPI_Datatype)0x0000022a)
#define MPI_2INT                       ((MPI_Datatype)0x0000022b)
#define MPI_SHORT_INT                  ((MPI_Datatype)0x0000022c)
#define MPI_LONG_DOUBLE_INT            ((MPI_Datatype)0x0000022d)
#define MPI_2REAL                      ((MPI_Datatype)0x00000230)
#define MPI_2DOUBLE_PRECISION          ((MPI_Datatype)0x00000231)
#define MPI_2INTEGER                   ((MPI_Datatype)0x00000232)
#define MPI_C_BOOL                     ((MPI_Datatype)0x00000238)
#define MPI_CXX_BOOL                   ((MPI_Datatype)0x00000239)
#define MPI_WCHAR                      ((MPI_Datatype)0x0000023c)
#define MPI_INT8_T                     ((MPI_Datatype)0x00000240)
#define MPI_UINT8_T                    ((MPI_Datatype)0x00000241)
#define MPI_CHAR                       ((MPI_Datatype)0x00000243)
#define MPI_SIGNED_CHAR                ((MPI_Datatype)0x00000244)
#define MPI_UNSIGNED_CHAR              ((MPI_Datatype)0x00000245)
#define MPI_BYTE                       ((MPI_Datatype)0x00000247)
#define MPI_INT16_T                    ((MPI_Datatype)0x00000248)
#define MPI_UINT16_T                   ((MPI_Datatype)0x00000249)
#define MPI_INT32_T                    ((MPI_Datatype)0x00000250)
#define MPI_UINT32_T                   ((MPI_Datatype)0x00000251)
#define MPI_INT64_T                    ((MPI_Datatype)0x00000258)
#define MPI_UINT64_T                   ((MPI_Datatype)0x00000259)
#define MPI_LOGICAL1                   ((MPI_Datatype)0x000002c0)
#define MPI_INTEGER1                   ((MPI_Datatype)0x000002c1)
#define MPI_LOGICAL2                   ((MPI_Datatype)0x000002c8)
#define MPI_INTEGER2                   ((MPI_Datatype)0x000002c9)
#define MPI_REAL2                      ((MPI_Datatype)0x000002ca)
#define MPI_LOGICAL4                   ((MPI_Datatype)0x000002d0)
#define MPI_INTEGER4                   ((MPI_Datatype)0x000002d1)
#define MPI_REAL4                      ((MPI_Datatype)0x000002d2)
#define MPI_COMPLEX4                   ((MPI_Datatype)0x000002d3)
#define MPI_LOGICAL8                   ((MPI_Datatype)0x000002d8)
#define MPI_INTEGER8                   ((MPI_Datatype)0x000002d9)
#define MPI_REAL8                      ((MPI_Datatype)0x000002da)
#define MPI_COMPLEX8                   ((MPI_Datatype)0x000002db)
#define MPI_LOGICAL16                  ((MPI_Datatype)0x000002e0)
#define MPI_INTEGER16                  ((MPI_Datatype)0x000002e1)
#define MPI_REAL16                     ((MPI_Datatype)0x000002e2)
#define MPI_COMPLEX16                  ((MPI_Datatype)0x000002e3)
#define MPI_COMPLEX32                  ((MPI_Datatype)0x000002eb)

/* ------------------------------------------------------------- constants */

enum {
    MPI_F_STATUS_SIZE                  = 8,
    MPI_F_SOURCE                       = 0,
    MPI_F_TAG                          = 1,
    MPI_F_ERROR                        = 2
};

/* Error classes (error codes returned by libhmpi are these classes). */
enum {
    MPI_SUCCESS                        = 0,
    MPI_ERR_BUFFER                     = 1,
    MPI_ERR_COUNT                      = 2,
    MPI_ERR_TYPE                       = 3,
    MPI_ERR_TAG                        = 4,
    MPI_ERR_COMM                       = 5,
    MPI_ERR_RANK                       = 6,
    MPI_ERR_REQUEST                    = 7,
    MPI_ERR_ROOT                       = 8,
    MPI_ERR_GROUP                      = 9,
    MPI_ERR_OP                         = 10,
    MPI_ERR_TOPOLOGY                   = 11,
    MPI_ERR_DIMS                       = 12,
    MPI_ERR_ARG                        = 13,
    MPI_ERR_UNKNOWN                    = 14,
    MPI_ERR_TRUNCATE                   = 15,
    MPI_ERR_OTHER                      = 16,
    MPI_ERR_INTERN                     = 17,
    MPI_ERR_PENDING                    = 18,
    MPI_ERR_IN_STATUS                  = 19,
    MPI_ERR_ACCESS                     = 20,
    MPI_ERR_AMODE                      = 21,
    MPI_ERR_ASSERT                     = 22,
    MPI_ERR_BAD_FILE                   = 23,
    MPI_ERR_BASE                       = 24,
    MPI_ERR_CONVERSION                 = 25,
    MPI_ERR_DISP                       = 26,
    MPI_ERR_DUP_DATAREP                = 27,
    MPI_ERR_FILE_EXISTS                = 28,
    MPI_ERR_FILE_IN_USE                = 29,
    MPI_ERR_FILE                       = 30,
    MPI_ERR_INFO_KEY                   = 31,
    MPI_ERR_INFO_NOKEY                 = 32,
    MPI_ERR_INFO_VALUE                 = 33,
    MPI_ERR_INFO                       = 34,
    MPI_ERR_IO                         = 35,
    MPI_ERR_KEYVAL                     = 36,
    MPI_ERR_LOCKTYPE                   = 37,
    MPI_ERR_NAME                       = 38,
    MPI_ERR_NO_MEM                     = 39,
    MPI_ERR_NOT_SAME                   = 40,
    MPI_ERR_NO_SPACE                   = 41,
    MPI_ERR_NO_SUCH_FILE               = 42,
    MPI_ERR_PORT                       = 43,
    MPI_ERR_QUOTA                      = 44,
    MPI_ERR_READ_ONLY                  = 45,
    MPI_ERR_RMA_ATTACH                 = 46,
    MPI_ERR_RMA_CONFLICT               = 47,
    MPI_ERR_RMA_RANGE                  = 48,
    MPI_ERR_RMA_SHARED                 = 49,
    MPI_ERR_RMA_SYNC                   = 50,
    MPI_ERR_SERVICE                    = 51,
    MPI_ERR_SIZE                       = 52,
    MPI_ERR_SPAWN                      = 53,
    MPI_ERR_UNSUPPORTED_DATAREP        = 54,
    MPI_ERR_UNSUPPORTED_OPERATION      = 55,
    MPI_ERR_WIN                        = 56,
    MPI_ERR_RMA_FLAVOR                 = 57,
    MPI_ERR_PROC_ABORTED               = 58,
    MPI_ERR_VALUE_TOO_LARGE            = 59,
    MPI_ERR_SESSION                    = 60,
    MPI_ERR_ERRHANDLER                 = 61,
    MPI_ERR_ABI                        = 62,
    MPI_ERR_LASTCODE                   = 0x3fff
};

/* Buffer address constants. */
#define MPI_BOTTOM                     ((void *)0)
#define MPI_IN_PLACE                   ((void *)1)
#define MPI_BUFFER_AUTOMATIC           ((void *)2)

/* Empty and ignored arguments. */
#define MPI_ARGV_NULL                  ((char **)0)
#define MPI_ARGVS_NULL                 ((char ***)0)
#define MPI_ERRCODES_IGNORE            ((int *)0)
#define MPI_STATUS_IGNORE              ((MPI_Status *)0)
#define MPI_STATUSES_IGNORE            ((MPI_Status *)0)
#define MPI_UNWEIGHTED                 ((int *)10)
#define MPI_WEIGHTS_EMPTY              ((int *)11)

/* String sizes. */
#define MPI_MAX_DATAREP_STRING          128
#define MPI_MAX_ERROR_STRING            512
#define MPI_MAX_INFO_KEY                256
#define MPI_MAX_INFO_VAL               1024
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_MAX_OBJECT_NAME             128
#define MPI_MAX_PORT_NAME              1024
#define MPI_MAX_PROCESSOR_NAME          256
#define MPI_MAX_STRINGTAG_LEN          1024
#define MPI_MAX_PSET_NAME_LEN          1024
#define MPI_BSEND_OVERHEAD              512

enum {
    MPI_MODE_APPEND                    = 1,
    MPI_MODE_CREATE                    = 2,
    MPI_MODE_DELETE_ON_CLOSE           = 4,
    MPI_MODE_EXCL                      = 8,
    MPI_MODE_RDONLY                    = 16,
    MPI_MODE_RDWR                      = 32,
    MPI_MODE_SEQUENTIAL                = 64,
    MPI_MODE_UNIQUE_OPEN               = 128,
    MPI_MODE_WRONLY                    = 256,
    MPI_MODE_NOCHECK                   = 1024,
    MPI_MODE_NOPRECEDE                 = 2048,
    MPI_MODE_NOPUT                     = 4096,
    MPI_MODE_NOSTORE                   = 8192,
    MPI_MODE_NOSUCCEED                 = 16384
};

enum {
    MPI_ANY_SOURCE                     = -1,
    MPI_ANY_TAG                        = -2,
    MPI_PROC_NULL                      = -3,
    MPI_ROOT                           = -4,
    MPI_UNDEFINED                      = -32766
};

enum {
    MPI_THREAD_SINGLE                  = 0,
    MPI_THREAD_FUNNELED                = 1024,
    MPI_THREAD_SERIALIZED              = 2048,
    MPI_THREAD_MULTIPLE                = 4096,

    MPI_ORDER_C                        = 0xC,
    MPI_ORDER_FORTRAN                  = 0xF,

    MPI_DISTRIBUTE_NONE                = 16,
    MPI_DISTRIBUTE_BLOCK               = 17,
    MPI_DISTRIBUTE_CYCLIC              = 18,
    MPI_DISTRIBUTE_DFLT_DARG           = 19,

    MPI_COMBINER_NAMED                 = 101,
    MPI_COMBINER_DUP                   = 102,
    MPI_COMBINER_CONTIGUOUS            = 103,
    MPI_COMBINER_VECTOR                = 104,
    MPI_COMBINER_HVECTOR               = 105,
    MPI_COMBINER_INDEXED               = 106,
    MPI_COMBINER_HINDEXED              = 107,
    MPI_COMBINER_INDEXED_BLOCK         = 108,
    MPI_COMBINER_HINDEXED_BLOCK        = 109,
    MPI_COMBINER_STRUCT                = 110,
    MPI_COMBINER_SUBARRAY              = 111,
    MPI_COMBINER_DARRAY                = 112,
    MPI_COMBINER_F90_REAL              = 113,
    MPI_COMBINER_F90_COMPLEX           = 114,
    MPI_COMBINER_F90_INTEGER           = 115,
    MPI_COMBINER_RESIZED               = 116,
    MPI_COMBINER_VALUE_INDEX           = 117,

    MPI_TYPECLASS_INTEGER              = 192,
    MPI_TYPECLASS_REAL                 = 193,
    MPI_TYPECLASS_COMPLEX              = 194,

    MPI_IDENT                          = 201,
    MPI_CONGRUENT                      = 202,
    MPI_SIMILAR                        = 203,
    MPI_UNEQUAL                        = 204,

    MPI_CART                           = 211,
    MPI_GRAPH                          = 212,
    MPI_DIST_GRAPH                     = 213,

    MPI_COMM_TYPE_SHARED               = 221,
    MPI_COMM_TYPE_HW_UNGUIDED          = 222,
    MPI_COMM_TYPE_HW_GUIDED            = 223,
    MPI_COMM_TYPE_RESOURCE_GUIDED      = 224,

    MPI_LOCK_EXCLUSIVE                 = 301,
    MPI_LOCK_SHARED                    = 302,

    MPI_WIN_FLAVOR_CREATE              = 311,
    MPI_WIN_FLAVOR_ALLOCATE            = 312,
    MPI_WIN_FLAVOR_DYNAMIC             = 313,
    MPI_WIN_FLAVOR_SHARED              = 314,

    MPI_WIN_UNIFIED                    = 321,
    MPI_WIN_SEPARATE                   = 322,

    MPI_SEEK_CUR                       = 401,
    MPI_SEEK_END                       = 402,
    MPI_SEEK_SET                       = 403
};

#define MPI_DISPLACEMENT_CURRENT       ((MPI_Offset)-1)

enum {
    MPI_KEYVAL_INVALID                 = 0,
    MPI_TAG_UB                         = 501,
    MPI_IO                             = 502,
    MPI_HOST                           = 503,
    MPI_WTIME_IS_GLOBAL                = 504,
    MPI_APPNUM                         = 505,
    MPI_LASTUSEDCODE                   = 506,
    MPI_UNIVERSE_SIZE                  = 507,
    MPI_WIN_BASE                       = 601,
    MPI_WIN_DISP_UNIT                  = 602,
    MPI_WIN_SIZE                       = 603,
    MPI_WIN_CREATE_FLAVOR              = 604,
    MPI_WIN_MODEL                      = 605
};

typedef void (MPI_Comm_errhandler_function)(MPI_Comm *comm, int *error_code, ...);
typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn;

/* -------------------------------------------------------------- routines */

#define HMPI_DECLARE(ret, name, args) ret MPI_##name args; ret PMPI_##name args

/* Environment. */
HMPI_DECLARE(int, Init, (int *argc, char ***argv));
HMPI_DECLARE(int, Init_thread, (int *argc, char ***argv, int required, int *provided));
HMPI_DECLARE(int, Finalize, (void));
HMPI_DECLARE(int, Initialized, (int *flag));
HMPI_DECLARE(int, Finalized, (int *flag));
HMPI_DECLARE(int, Abort, (MPI_Comm comm, int errorcode));
HMPI_DECLARE(int, Query_thread, (int *provided));
HMPI_DECLARE(int, Is_thread_main, (int *flag));
HMPI_DECLARE(double, Wtime, (void));
HMPI_DECLARE(double, Wtick, (void));
HMPI_DECLARE(int, Get_processor_name, (char *name, int *resultlen));
HMPI_DECLARE(int, Get_version, (int *version, int *subversion));
HMPI_DECLARE(int, Get_library_version, (char *version, int *resultlen));
HMPI_DECLARE(int, Abi_get_version, (int *abi_major, int *abi_minor));
HMPI_DECLARE(int, Alloc_mem, (MPI_Aint size, MPI_Info info, void *baseptr));
HMPI_DECLARE(int, Free_mem, (void *base));
HMPI_DECLARE(int, Get_address, (const void *location, MPI_Aint *address));
HMPI_DECLARE(MPI_Aint, Aint_add, (MPI_Aint base, MPI_Aint disp));
HMPI_DECLARE(MPI_Aint, Aint_diff, (MPI_Aint addr1, MPI_Aint addr2));

/* Errors and error handlers. */
HMPI_DECLARE(int, Error_string, (int errorcode, char *string, int *resultlen));
HMPI_DECLARE(int, Error_class, (int errorcode, int *errorclass));
HMPI_DECLARE(int, Comm_set_errhandler, (MPI_Comm comm, MPI_Errhandler errhandler));
HMPI_DECLARE(int, Comm_get_errhandler, (MPI_Comm comm, MPI_Errhandler *errhandler));
HMPI_DECLARE(int, Comm_create_errhandler, (MPI_Comm_errhandler_function *comm_errhandler_fn, MPI_Errhandler *errhandler));
HMPI_DECLARE(int, Comm_call_errhandler, (MPI_Comm comm, int errorcode));
HMPI_DECLARE(int, Errhandler_free, (MPI_Errhandler *errhandler));

/* Communicators. */
HMPI_DECLARE(int, Comm_rank, (MPI_Comm comm, int *rank));
HMPI_DECLARE(int, Comm_size, (MPI_Comm comm, int *size));
HMPI_DECLARE(int, Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm));
HMPI_DECLARE(int, Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm));
HMPI_DECLARE(int, Comm_split_type, (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm));
HMPI_DECLARE(int, Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm));
HMPI_DECLARE(int, Comm_free, (MPI_Comm *comm));
HMPI_DECLARE(int, Comm_compare, (MPI_Comm comm1, MPI_Comm comm2, int *result));
HMPI_DECLARE(int, Comm_get_name, (MPI_Comm comm, char *comm_name, int *resultlen));
HMPI_DECLARE(int, Comm_set_name, (MPI_Comm comm, const char *comm_name));
HMPI_DECLARE(int, Comm_group, (MPI_Comm comm, MPI_Group *group));
HMPI_DECLARE(int, Comm_test_inter, (MPI_Comm comm, int *flag));
HMPI_DECLARE(int, Barrier, (MPI_Comm comm));

/* Groups. */
HMPI_DECLARE(int, Group_size, (MPI_Group group, int *size));
HMPI_DECLARE(int, Group_rank, (MPI_Group group, int *rank));
HMPI_DECLARE(int, Group_incl, (MPI_Group group, int n, const int ranks[], MPI_Group *newgroup));
HMPI_DECLARE(int, Group_excl, (MPI_Group group, int n, const int ranks[], MPI_Group *newgroup));
HMPI_DECLARE(int, Group_range_incl, (MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup));
HMPI_DECLARE(int, Group_range_excl, (MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup));
HMPI_DECLARE(int, Group_union, (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup));
HMPI_DECLARE(int, Group_intersection, (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup));
HMPI_DECLARE(int, Group_difference, (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup));
HMPI_DECLARE(int, Group_translate_ranks, (MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]));
HMPI_DECLARE(int, Group_compare, (MPI_Group group1, MPI_Group group2, int *result));
HMPI_DECLARE(int, Group_free, (MPI_Group *group));

/* Point-to-point. */
HMPI_DECLARE(int, Send, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm));
HMPI_DECLARE(int, Ssend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm));
HMPI_DECLARE(int, Rsend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm));
HMPI_DECLARE(int, Recv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status));
HMPI_DECLARE(int, Isend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
HMPI_DECLARE(int, Issend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
HMPI_DECLARE(int, Irsend, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
HMPI_DECLARE(int, Irecv, (void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request));
HMPI_DECLARE(int, Sendrecv, (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status));
HMPI_DECLARE(int, Sendrecv_replace, (void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag, MPI_Comm comm, MPI_Status *status));
HMPI_DECLARE(int, Probe, (int source, int tag, MPI_Comm comm, MPI_Status *status));
HMPI_DECLARE(int, Iprobe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status));
HMPI_DECLARE(int, Mprobe, (int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status));
HMPI_DECLARE(int, Improbe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status));
HMPI_DECLARE(int, Mrecv, (void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status));
HMPI_DECLARE(int, Imrecv, (void *buf, int count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request));
HMPI_DECLARE(int, Get_count, (const MPI_Status *status, MPI_Datatype datatype, int *count));


/* Requests. */
HMPI_DECLARE(int, Wait, (MPI_Request *request, MPI_Status *status));
HMPI_DECLARE(int, Waitall, (int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]));
HMPI_DECLARE(int, Waitany, (int count, MPI_Request array_of_requests[], int *indx, MPI_Status *status));
HMPI_DECLARE(int, Waitsome, (int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[], MPI_Status array_of_statuses[]));
HMPI_DECLARE(int, Test, (MPI_Request *request, int *flag, MPI_Status *status));
HMPI_DECLARE(int, Testall, (int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[]));
HMPI_DECLARE(int, Testany, (int count, MPI_Request array_of_requests[], int *indx, int *flag, MPI_Status *status));
HMPI_DECLARE(int, Testsome, (int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[], MPI_Status array_of_statuses[]));
HMPI_DECLARE(int, Request_get_status, (MPI_Request request, int *flag, MPI_Status *status));
HMPI_DECLARE(int, Cancel, (MPI_Request *request));
HMPI_DECLARE(int, Request_free, (MPI_Request *request));
HMPI_DECLARE(int, Test_cancelled, (const MPI_Status *status, int *flag));

/* Datatypes. */
HMPI_DECLARE(int, Type_size, (MPI_Datatype datatype, int *size));
HMPI_DECLARE(int, Type_size_x, (MPI_Datatype datatype, MPI_Count *size));
HMPI_DECLARE(int, Type_size_c, (MPI_Datatype datatype, MPI_Count *size));
HMPI_DECLARE(int, Type_get_extent, (MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent));
HMPI_DECLARE(int, Type_get_extent_x, (MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent));
HMPI_DECLARE(int, Type_get_true_extent, (MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent));
HMPI_DECLARE(int, Type_contiguous, (int count, MPI_Datatype oldtype, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_vector, (int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_create_hvector, (int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_indexed, (int count, const int array_of_blocklengths[], const int array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_create_hindexed, (int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_create_indexed_block, (int count, int blocklength, const int array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_create_hindexed_block, (int count, int blocklength, const MPI_Aint array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_create_struct, (int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[], const MPI_Datatype array_of_types[], MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_create_resized, (MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_dup, (MPI_Datatype oldtype, MPI_Datatype *newtype));
HMPI_DECLARE(int, Type_commit, (MPI_Datatype *datatype));
HMPI_DECLARE(int, Type_free, (MPI_Datatype *datatype));
HMPI_DECLARE(int, Type_get_name, (MPI_Datatype datatype, char *type_name, int *resultlen));
HMPI_DECLARE(int, Type_set_name, (MPI_Datatype datatype, const char *type_name));
HMPI_DECLARE(int, Pack, (const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, int outsize, int *position, MPI_Comm comm));
HMPI_DECLARE(int, Unpack, (const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype datatype, MPI_Comm comm));
HMPI_DECLARE(int, Pack_size, (int incount, MPI_Datatype datatype, MPI_Comm comm, int *size));

/* Handle conversion (the standard ABI's replacement for c2f/f2c). */
HMPI_DECLARE(MPI_Comm, Comm_fromint, (int comm));
HMPI_DECLARE(int, Comm_toint, (MPI_Comm comm));
HMPI_DECLARE(MPI_Errhandler, Errhandler_fromint, (int errhandler));
HMPI_DECLARE(int, Errhandler_toint, (MPI_Errhandler errhandler));
HMPI_DECLARE(MPI_Group, Group_fromint, (int group));
HMPI_DECLARE(int, Group_toint, (MPI_Group group));
HMPI_DECLARE(MPI_Message, Message_fromint, (int message));
HMPI_DECLARE(int, Message_toint, (MPI_Message message));
HMPI_DECLARE(MPI_Request, Request_fromint, (int request));
HMPI_DECLARE(int, Request_toint, (MPI_Request request));
HMPI_DECLARE(MPI_Datatype, Type_fromint, (int datatype));
HMPI_DECLARE(int, Type_toint, (MPI_Datatype datatype));
HMPI_DECLARE(MPI_Op, Op_fromint, (int op));
HMPI_DECLARE(int, Op_toint, (MPI_Op op));
HMPI_DECLARE(MPI_Info, Info_fromint, (int info));
HMPI_DECLARE(int, Info_toint, (MPI_Info info));

#undef HMPI_DECLARE

/* ------------------------------------------------------ hmpi extensions */

/* The address queries below never read the memory they are given. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#define HMPI_ADDRESS_ONLY(i) __attribute__((access(none, i)))
#else
#define HMPI_ADDRESS_ONLY(i)
#endif

/* The node-local rank (the rank's arena in the shared heap) of rank `rank`
 * of `comm`; MPI_UNDEFINED for MPI_PROC_NULL. */
int HMPI_Comm_node_rank(MPI_Comm comm, int rank, int *node_rank);
/* Whether `ptr` points into the node's shared heap (any rank's arena). */
int HMPI_Is_shared(const void *ptr, int *flag) HMPI_ADDRESS_ONLY(1);
/* The node-local rank whose arena holds `ptr`; MPI_UNDEFINED if `ptr` is
 * not in the shared heap. */
int HMPI_Heap_owner(const void *ptr, int *node_rank) HMPI_ADDRESS_ONLY(1);

#if defined(__cplusplus)
}
#endif

#endif /* HMPI_MPI_H */
