#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A writer-preferring reader-writer lock over `pthread_rwlock_t`.
///
/// Every transaction of an ``Environment`` holds it shared; growing the map
/// (which LMDB allows only while no transaction of the process is active)
/// holds it exclusively.
///
/// It is not reentrant, and with writer preference a thread that takes it
/// shared twice deadlocks as soon as a map growth waits in between. So each
/// lock remembers, per thread, whether the thread holds it: taking it again is
/// a programming error that debug builds stop at (`assertionFailure`, naming
/// the lock); release builds run the nested body under the hold the thread
/// already has, which is safe for shared holds and reported for exclusive ones.
///
/// `@unchecked Sendable` is safe here: the stored properties are a pointer to a
/// `pthread_rwlock_t` and a `pthread_key_t`, both created once in `init`, never
/// reassigned, destroyed only in `deinit`, and used only through the pthread
/// functions, which are thread-safe; the key's value is per thread by definition.
final class ReadWriteLock: @unchecked Sendable {
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>
    /// Non-nil on the threads that hold the lock (the value is only a marker).
    private let holder: pthread_key_t

    init() {
        lock = .allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        #if canImport(Glibc)
        // Writer preference so that a map growth cannot starve behind readers.
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        #endif
        pthread_rwlock_init(lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        holder = key
    }

    deinit {
        pthread_key_delete(holder)
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// Whether the calling thread holds this lock (shared or exclusively).
    var isHeldByCurrentThread: Bool { pthread_getspecific(holder) != nil }

    func withShared<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        if isHeldByCurrentThread {
            assertionFailure("ReadWriteLock taken twice by one thread: a transaction (or environment call) inside a transaction")
            return try body()  // already held: nested shared work is safe under the outer hold
        }
        pthread_rwlock_rdlock(lock)
        pthread_setspecific(holder, lock)
        defer {
            pthread_setspecific(holder, nil)
            pthread_rwlock_unlock(lock)
        }
        return try body()
    }

    /// - Returns: `nil` when the calling thread already holds the lock (taking it
    ///   exclusively then would deadlock); the caller reports that.
    func withExclusive<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R? {
        if isHeldByCurrentThread {
            assertionFailure("ReadWriteLock taken exclusively by a thread that holds it: a map change inside a transaction")
            return nil
        }
        pthread_rwlock_wrlock(lock)
        pthread_setspecific(holder, lock)
        defer {
            pthread_setspecific(holder, nil)
            pthread_rwlock_unlock(lock)
        }
        return try body()
    }
}
