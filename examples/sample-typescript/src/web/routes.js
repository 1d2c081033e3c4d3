'use strict';

const { formatLoan } = require('./format');

/** Express-style handlers around a LoanService. */
function loanRoutes(service, members) {
  return {
    lend(request, response) {
      const member = members.find(request.body.memberId);
      service
        .lendByIsbn(request.body.isbn, member)
        .then((loan) => response.json(formatLoan(loan)))
        .catch((error) => response.status(409).json({ error: error.message }));
    },
  };
}

module.exports = { loanRoutes };
