// Writing a file so that a reader never sees half of it, and concurrent
// writers never interleave: the text goes to a fresh temporary file in the
// same directory (mkstemp: a unique name per writer, so two writers never
// share one), is flushed to disk (fsync), and is renamed over the target
// (atomic within one file system); the directory is synced so the rename
// itself survives a crash. With several writers, the last rename wins and the
// file is always one writer's complete text.
#pragma once

#include <string>

namespace boostcomm::core {

// Throws Error{kInvalidArgument} naming `what` and the path when the
// directory is not writable or a write fails; the temporary file is removed.
void writeFileAtomically(const std::string& path, const std::string& text, const char* what);

}  // namespace boostcomm::core
