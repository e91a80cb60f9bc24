// This thread's work recorder (runtime/work_recorder.h).
#include "runtime/work_recorder.h"

namespace ember {

namespace {
thread_local WorkRecorder* t_recorder = nullptr;
}

WorkRecorder* active_work_recorder() { return t_recorder; }
void set_active_work_recorder(WorkRecorder* r) { t_recorder = r; }

WorkRecorderScope::WorkRecorderScope(WorkRecorder* r) : previous_(t_recorder) { t_recorder = r; }
WorkRecorderScope::~WorkRecorderScope() { t_recorder = previous_; }

}  // namespace ember
