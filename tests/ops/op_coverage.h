// Which ops the op-conformance cases build, for OpTableDocs (tests/ops/op_table_docs_test.cpp):
// the cross-backend comparison's cases (tests/ops/cross_backend_test.cpp, every op against the
// reference backend on every device) and the gradient checks (tests/autograd/gradcheck_test.cpp).
// A case "builds" an op when a node of it is in the graph behind the case's result, made on the
// reference device without computing anything.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ember/array.h"
#include "op_table/op_table.h"

namespace ember::testing {

// Each cross-backend case's name and the ops its graph holds.
std::vector<std::pair<std::string, std::set<Op>>> cross_backend_case_ops();
// Each gradient check's name and the ops its graph holds (its declared op included).
std::vector<std::pair<std::string, std::set<Op>>> gradcheck_case_ops();
// The ops of the nodes behind `a` (realized nodes no longer hold their inputs: only the pending
// part of the graph is seen, and the realized node itself).
std::set<Op> ops_in_graph(const Array& a);

}  // namespace ember::testing
