//! The MPI window of a segment whose team spans nodes: hmpi's
//! [`NetWindow`](hmpi_core::multinode::NetWindow) with feature `mpi`;
//! without it no team spans nodes, and the type has no values (its
//! methods exist so that the callers read the same either way).

#[cfg(feature = "mpi")]
pub(crate) use hmpi_core::multinode::NetWindow as Net;

#[cfg(not(feature = "mpi"))]
pub(crate) use none::Net;

#[cfg(not(feature = "mpi"))]
#[allow(clippy::too_many_arguments, clippy::missing_safety_doc)]
mod none {
    use hmpi_core::datatype::Datatype;
    use hmpi_core::op::SystemOperation;
    use hmpi_core::Result;

    /// No segment spans nodes without feature `mpi`.
    #[derive(Debug)]
    pub(crate) enum Net {}

    impl Net {
        pub(crate) fn on_node(&self, _rank: i32) -> Option<i32> {
            match *self {}
        }

        pub(crate) unsafe fn put(&self, _: *const u8, _: usize, _: i32, _: u64) -> Result<()> {
            match *self {}
        }

        pub(crate) unsafe fn get(&self, _: *mut u8, _: usize, _: i32, _: u64) -> Result<()> {
            match *self {}
        }

        pub(crate) unsafe fn put_typed(
            &self,
            _: *const u8,
            _: usize,
            _: &Datatype,
            _: i32,
            _: u64,
            _: usize,
            _: &Datatype,
        ) -> Result<()> {
            match *self {}
        }

        pub(crate) unsafe fn get_typed(
            &self,
            _: *mut u8,
            _: usize,
            _: &Datatype,
            _: i32,
            _: u64,
            _: usize,
            _: &Datatype,
        ) -> Result<()> {
            match *self {}
        }

        pub(crate) unsafe fn accumulate(
            &self,
            _: *const u8,
            _: usize,
            _: &Datatype,
            _: i32,
            _: u64,
            _: SystemOperation,
        ) -> Result<()> {
            match *self {}
        }

        pub(crate) unsafe fn fetch_and_op(
            &self,
            _: *const u8,
            _: *mut u8,
            _: &Datatype,
            _: i32,
            _: u64,
            _: SystemOperation,
        ) -> Result<()> {
            match *self {}
        }

        pub(crate) unsafe fn compare_and_swap(
            &self,
            _: *const u8,
            _: *const u8,
            _: *mut u8,
            _: &Datatype,
            _: i32,
            _: u64,
        ) -> Result<()> {
            match *self {}
        }

        pub(crate) fn flush(&self, _: i32) -> Result<()> {
            match *self {}
        }

        pub(crate) fn flush_all(&self) -> Result<()> {
            match *self {}
        }

        pub(crate) fn free(self) {
            match self {}
        }
    }
}
