'use strict';

function formatLoan(loan) {
  return {
    id: loan.id,
    book: loan.book.title,
    member: loan.member.name,
    due: loan.due.toISOString().slice(0, 10),
    status: loan.status,
  };
}

module.exports = { formatLoan };
