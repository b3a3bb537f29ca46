// SPDX-License-Identifier: MIT
// Atomic replacement of output files: temporary file, fsync, metadata, rename.
#include "sframe/elf/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

namespace sframe {

struct OutputFile::State {
  std::string target;  // the destination, symbolic links resolved
  std::string tmp;     // empty when writing directly
  int fd = -1;
  bool close_fd = true;  // false for standard output
  bool replace = false;  // `target` exists and is replaced
  bool committed = false;
  struct stat old {};
  mode_t new_mode = 0644;

  ~State() {
    if (fd >= 0 && close_fd) ::close(fd);
    if (!committed && !tmp.empty()) ::unlink(tmp.c_str());
  }
};

namespace {

Unexpected io_error() { return make_error(IoErrc::kIoError, 0, static_cast<std::uint64_t>(errno)); }

mode_t current_umask() {
  // There is no way to read the umask without setting it; the tool is
  // single-threaded when it writes files.
  const mode_t m = ::umask(022);
  ::umask(m);
  return m;
}

// Copies every extended attribute of `from` to `fd`. The kernel removes
// security.capability when a file is written or chowned, so this runs last.
bool copy_xattrs(const std::string& from, int fd) {
  ssize_t n = ::listxattr(from.c_str(), nullptr, 0);
  if (n < 0) return errno == ENOTSUP || errno == ENODATA;
  std::vector<char> names(static_cast<std::size_t>(n) + 1);
  n = ::listxattr(from.c_str(), names.data(), names.size());
  if (n < 0) return false;
  std::vector<char> value;
  for (std::size_t at = 0; at < static_cast<std::size_t>(n);) {
    const char* name = names.data() + at;
    at += std::char_traits<char>::length(name) + 1;
    const ssize_t len = ::getxattr(from.c_str(), name, nullptr, 0);
    if (len < 0) return false;
    value.resize(static_cast<std::size_t>(len) + 1);
    const ssize_t got = ::getxattr(from.c_str(), name, value.data(), value.size());
    if (got < 0 || ::fsetxattr(fd, name, value.data(), static_cast<std::size_t>(got), 0) != 0) return false;
  }
  return true;
}

}  // namespace

OutputFile::OutputFile(std::unique_ptr<State> s) noexcept : s_(std::move(s)) {}
OutputFile::OutputFile(OutputFile&&) noexcept = default;
OutputFile& OutputFile::operator=(OutputFile&&) noexcept = default;
OutputFile::~OutputFile() = default;
int OutputFile::fd() const noexcept { return s_->fd; }

Expected<OutputFile> OutputFile::create(const std::string& path, const std::string& mode_source) {
  auto s = std::make_unique<State>();
  if (path == "-") {
    s->fd = STDOUT_FILENO;
    s->close_fd = false;
    return OutputFile(std::move(s));
  }
  s->target = path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // Replace what the link points at, not the link itself.
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      s->target = real;
      std::free(real);
    }
  }
  if (::stat(s->target.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      // A device or FIFO (e.g. /dev/null): nothing to keep, nothing to rename.
      s->fd = ::open(s->target.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
      if (s->fd < 0) return io_error();
      return OutputFile(std::move(s));
    }
    s->replace = true;
    s->old = st;
  } else if (errno != ENOENT) {
    return io_error();
  }
  struct stat src {};
  s->new_mode = !mode_source.empty() && ::stat(mode_source.c_str(), &src) == 0 ? (src.st_mode & 0777)
                                                                                : (0666 & ~current_umask());
  // Same directory, so the rename stays on one file system and is atomic.
  const auto slash = s->target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : s->target.substr(0, slash);
  const std::string base = slash == std::string::npos ? s->target : s->target.substr(slash + 1);
  std::string tmp = dir + "/." + base + ".XXXXXX";
  s->fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (s->fd < 0) return io_error();
  s->tmp = std::move(tmp);
  return OutputFile(std::move(s));
}

Expected<void> OutputFile::write(std::span<const std::byte> bytes) {
  for (std::size_t at = 0; at < bytes.size();) {
    const ssize_t w = ::write(s_->fd, bytes.data() + at, bytes.size() - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return io_error();
    at += static_cast<std::size_t>(w);
  }
  return {};
}

Expected<void> OutputFile::commit(Durability durability) {
  const bool sync = durability == Durability::kSynced;
  State& s = *s_;
  if (s.tmp.empty()) {
    // Written directly: only a late error from close is left to report.
    s.committed = true;
    if (!s.close_fd) return {};
    const int fd = s.fd;
    s.fd = -1;
    if (::close(fd) != 0) return io_error();
    return {};
  }
  // Data first: a full disk shows up here at the latest.
  if (sync && ::fsync(s.fd) != 0) return io_error();
  if (s.replace) {
    // chown clears set-user-ID bits, so the mode comes after it.
    struct stat now {};
    if (::fstat(s.fd, &now) != 0) return io_error();
    if ((now.st_uid != s.old.st_uid || now.st_gid != s.old.st_gid) && ::fchown(s.fd, s.old.st_uid, s.old.st_gid) != 0)
      return io_error();
    if (::fchmod(s.fd, s.old.st_mode & 07777) != 0) return io_error();
    if (!copy_xattrs(s.target, s.fd)) return io_error();
  } else if (::fchmod(s.fd, s.new_mode) != 0) {
    return io_error();
  }
  if (sync && ::fsync(s.fd) != 0) return io_error();
  if (::rename(s.tmp.c_str(), s.target.c_str()) != 0) return io_error();
  s.committed = true;
  const int fd = s.fd;
  s.fd = -1;
  ::close(fd);
  return {};
}

Expected<void> write_file(const std::string& path, std::span<const std::byte> bytes, const std::string& mode_source) {
  auto out = OutputFile::create(path, mode_source);
  if (!out) return Unexpected{out.error()};
  if (auto ok = out->write(bytes); !ok) return ok;
  return out->commit();
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace sframe
